"""A generated program treats subnormal floats as zero (templates/common/runtime.py.j2, ``flush_subnormals``).

Why a user notices: Adam's first moment of a weight whose gradient stopped (a dead ReLU unit) decays by 0.9 a
step into the subnormal range, where x86 arithmetic is about 100 times slower; a 1000-epoch CPU run of the zoo's
MLP took 1.6 times its first epochs' step time, and the selector, which times a calibration of a few steps,
estimated it 1.5-2x short (issue 26; docs/performance.md, "Subnormal floats"). TensorFlow flushes them in its own
threads already; the program now does for every framework, before the framework starts its threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.codegen import generate
from tests.data.fixtures import spec_with_data

pytestmark = pytest.mark.frameworks

ENV = {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": "", "PYTHONWARNINGS": "ignore",
       "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}

# Adam on 200,000 weights: one step with a gradient, then 900 without (0.1 x 0.9^900 = 7e-43, subnormal), on two
# intra-op threads, and a Python thread started afterwards: what a long run's optimizer does to a dead unit.
ADAM_AFTER_THE_GRADIENT_STOPS = """
import json, sys, threading
import numpy as np
import torch
import runtime

flushed = runtime.flush_subnormals() if sys.argv[1] == "flush" else False
torch.set_num_threads(2)
w = torch.nn.Parameter(torch.zeros(200_000))
opt = torch.optim.Adam([w], lr=1e-3)
w.grad = torch.ones_like(w)
opt.step()
for _ in range(900):
    w.grad = torch.zeros_like(w)
    opt.step()
m = opt.state[w]["exp_avg"]
seen = {}
thread = threading.Thread(target=lambda: seen.update(later=float(np.float32(1e-39) * np.float32(1.0))))
thread.start()
thread.join()
print(json.dumps({"flushed": flushed, "reported": runtime.subnormals_flushed(), "nonzero": int((m != 0).sum()),
                  "subnormal": int(((m != 0) & (m.abs() < torch.finfo(torch.float32).tiny)).sum()), **seen}))
"""


def _adam(folder: Path, mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", ADAM_AFTER_THE_GRADIENT_STOPS, mode], cwd=folder, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_optimizer_state_of_a_stopped_gradient_holds_no_subnormals(tmp_path: Path) -> None:
    generate(spec_with_data({"source": "sklearn:iris", "batch_size": 16}), "torch").write(tmp_path)
    as_before = _adam(tmp_path, "keep")  # without the program's setting: the slow numbers are there
    assert as_before["subnormal"] == 200_000 and not as_before["reported"] and as_before["later"] > 0
    flushed = _adam(tmp_path, "flush")
    assert flushed["flushed"] and flushed["reported"]
    assert flushed["subnormal"] == 0 and flushed["nonzero"] == 0  # the moment went to zero, not through the range
    assert flushed["later"] == 0.0  # a thread started afterwards flushes too


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_every_framework_s_program_trains_with_subnormals_flushed_and_says_so(tmp_path: Path, framework: str) -> None:
    spec = spec_with_data({"source": "sklearn:iris", "validation_split": 0.2, "batch_size": 16})
    generate(spec, framework).write(tmp_path)
    proc = subprocess.run([sys.executable, "train.py", "--epochs", "1"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    start = json.loads((tmp_path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert start["event"] == "start" and start["flush_subnormals"] is True
    assert "flush_subnormals" in proc.stdout  # the "training on cpu" line lists the switch
