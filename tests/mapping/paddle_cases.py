"""A torch-versus-paddle runner for the paddle mapper's tests (its graphs: the op catalogue, tests/op_cases.py).

It generates the torch and the paddle ``model.py`` for each spec, then runs torch
and paddle in *separate* subprocesses (paddle after tensorflow in one process crashes, and
the portal never imports a framework): torch initialises the weights, draws inputs and
writes its eval-mode outputs to an .npz; paddle loads the same canonical weights, runs the
same inputs and reports the largest absolute difference per case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from core.codegen import generate
from core.spec import PipelineSpec

ROOT = Path(__file__).resolve().parents[2]

_TORCH = r"""
import importlib.util, json, sys
import numpy as np
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

root, train_steps = sys.argv[1], int(sys.argv[2])
cases = json.load(open(f"{root}/cases.json"))
for i, case in enumerate(cases):
    torch.manual_seed(i)
    m = load(f"{root}/{case}/torch/model.py", f"torch_model_{i}")
    model = m.build_model()
    weights = m.canonical_weights(model)
    rng = np.random.default_rng(i)
    shape = (4,) + tuple(m.INPUT_SHAPE)
    if m.INPUT_DTYPE == "int64":
        x = rng.integers(0, 11, size=shape).astype("int64")
    else:
        x = rng.standard_normal(shape).astype("float32")
    out = m.forward_numpy(model, x)
    # training-mode update of normalisation statistics (BatchNorm's running mean/variance)
    model.train()
    with torch.no_grad():
        for step in range(train_steps):
            model(torch.as_tensor(rng.standard_normal(shape).astype("float32") * 2 + 1)
                  if m.INPUT_DTYPE == "float32" else torch.as_tensor(x))
    after = m.canonical_weights(model)
    np.savez(f"{root}/{case}/torch.npz", x=x, out=out,
             **{"w:" + k: v for k, v in weights.items()}, **{"a:" + k: v for k, v in after.items()})
print("torch done")
"""

_PADDLE = r"""
import importlib.util, json, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import paddle

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

root, train_steps = sys.argv[1], int(sys.argv[2])
cases = json.load(open(f"{root}/cases.json"))
report = {}
for i, case in enumerate(cases):
    data = np.load(f"{root}/{case}/torch.npz")
    m = load(f"{root}/{case}/paddle/model.py", f"paddle_model_{i}")
    model = m.build_model()
    weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
    m.load_canonical_weights(model, weights)
    back = m.canonical_weights(model)
    roundtrip = max([float(np.abs(back[k] - weights[k]).max()) for k in weights] + [0.0])
    out = m.forward_numpy(model, data["x"])
    entry = {"roundtrip": roundtrip}
    if out.shape != data["out"].shape:
        entry["error"] = f"output shape {out.shape} != torch {data['out'].shape}"
    else:
        entry["max_abs_diff"] = float(np.abs(out - data["out"]).max()) if out.size else 0.0
    rng = np.random.default_rng(i)
    shape = (4,) + tuple(m.INPUT_SHAPE)
    if m.INPUT_DTYPE == "int64":
        x = rng.integers(0, 11, size=shape).astype("int64")
    else:
        x = rng.standard_normal(shape).astype("float32")
    model.train()
    with paddle.no_grad():
        for step in range(train_steps):
            model(paddle.to_tensor(rng.standard_normal(shape).astype("float32") * 2 + 1)
                  if m.INPUT_DTYPE == "float32" else paddle.to_tensor(x))
    after = m.canonical_weights(model)
    entry["after_train_diff"] = max([float(np.abs(after[k] - data["a:" + k]).max()) for k in after] + [0.0])
    report[case] = entry
print("REPORT " + json.dumps(report))
"""


def run_equivalence(specs: dict[str, PipelineSpec], root: Path, train_steps: int = 2,
                    timeout: float = 600) -> dict[str, dict[str, Any]]:
    """Generate both programs per spec under ``root`` and compare them; returns the paddle report."""
    root.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        generate(spec, "torch").write(root / name / "torch")
        generate(spec, "paddle").write(root / name / "paddle")
    (root / "cases.json").write_text(json.dumps(list(specs)))
    env = {**os.environ, "PYTHONPATH": "", "GLOG_minloglevel": "2"}
    for script in (_TORCH, _PADDLE):
        proc = subprocess.run([sys.executable, "-c", script, str(root), str(train_steps)], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=root)
        if proc.returncode != 0:
            raise AssertionError(f"framework subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                 f"{proc.stderr[-5000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])
