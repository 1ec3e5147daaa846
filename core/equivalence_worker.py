"""Runs generated ``model.py`` files of ONE framework and saves their outputs (a subprocess of
:mod:`core.equivalence`).

    python -m core.equivalence_worker --dir D --weights W.npz --inputs X.npz --out Y.npz [--train-update]
    python -m core.equivalence_worker --jobs JOBS.json

Each job loads ``D/model.py`` (framework read from ``D/manifest.json``), builds the model, loads the
canonical weights, runs the inputs in eval mode and writes ``output`` to Y.npz. With
``train_update`` it also runs one training-mode forward pass on a fresh copy and writes the
canonical weights afterwards as ``after/<key>`` (BatchNorm running statistics move; nothing
else should). With ``--jobs`` a failing job is recorded in ``<out>.error.txt`` and the others
still run, so one broken graph does not hide the rest.

This module imports only numpy, the standard library and — inside the job — one framework and
the generated model.py; never another part of FlowTrain, so it measures the generated code alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np


def load_model_module(folder: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, folder / "model.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {folder / 'model.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def train_forward(framework: str, module: ModuleType, model: Any, x: np.ndarray) -> None:
    """One forward pass in training mode without an optimizer step (updates BatchNorm statistics)."""
    if framework == "torch":
        import torch

        model.train()
        with torch.no_grad():
            model(torch.from_numpy(x))
    elif framework == "keras":
        to_layout = getattr(module, "to_keras_layout", None)
        model(to_layout(x) if to_layout is not None else x, training=True)
    elif framework == "paddle":
        import paddle

        model.train()
        with paddle.no_grad():
            model(paddle.to_tensor(x))
    else:
        raise ValueError(f"unknown framework {framework!r}")


def run_job(job: dict[str, Any], index: int) -> None:
    folder = Path(job["dir"])
    framework = json.loads((folder / "manifest.json").read_text())["framework"]
    module = load_model_module(folder, f"flowtrain_equivalence_model_{index}")
    with np.load(job["weights"]) as w:
        weights = {k: w[k] for k in w.files}
    with np.load(job["inputs"]) as i:
        x = i["x"]
    if framework == "torch":
        import torch

        torch.manual_seed(0)
    model = module.build_model()
    module.load_canonical_weights(model, weights)
    results = {"output": np.asarray(module.forward_numpy(model, x), dtype=np.float32)}
    if job.get("train_update"):
        fresh = module.build_model()
        module.load_canonical_weights(fresh, weights)
        train_forward(framework, module, fresh, x)
        for key, value in module.canonical_weights(fresh).items():
            results[f"after/{key}"] = np.asarray(value, dtype=np.float32)
    out = Path(job["out"])
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(tmp, **results)
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", help="JSON list of {dir, weights, inputs, out, train_update}")
    parser.add_argument("--dir")
    parser.add_argument("--weights")
    parser.add_argument("--inputs")
    parser.add_argument("--out")
    parser.add_argument("--train-update", action="store_true")
    args = parser.parse_args(argv)
    if args.jobs:
        jobs = json.loads(Path(args.jobs).read_text())
        for i, job in enumerate(jobs):
            try:
                run_job(job, i)
            except Exception:  # noqa: BLE001  (recorded for the parent, which reports it per graph)
                Path(job["out"] + ".error.txt").write_text(traceback.format_exc())
        return 0
    if not (args.dir and args.weights and args.inputs and args.out):
        parser.error("give --jobs, or all of --dir, --weights, --inputs and --out")
    run_job({"dir": args.dir, "weights": args.weights, "inputs": args.inputs, "out": args.out,
             "train_update": args.train_update}, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
