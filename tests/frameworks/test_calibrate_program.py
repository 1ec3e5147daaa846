"""The generated program's ``--calibrate`` times what the selector's estimate of a whole run needs, the same way in
every framework (templates/common/loop.py.j2, issue 26): a first and a steady validation pass (keras traces its
evaluation in the first; a run's later passes are the second's) and a first and a steady checkpoint write (the
first pays one-off costs), each timed apart, then the final model, and an epoch's start beyond a step (paid every
epoch); and leaves nothing of them behind.
Behaviour only: how long each took is bench/estimates.py's to measure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.codegen import generate
from schedulers.base import JobStatus, RunState
from schedulers.calibration import whole_run_terms
from tests.data.fixtures import spec_with_data

pytestmark = pytest.mark.frameworks

ENV = {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": "", "PYTHONWARNINGS": "ignore",
       "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_calibration_times_a_first_and_a_steady_validation_pass_and_checkpoint(tmp_path: Path, framework: str) -> None:
    spec = spec_with_data({"source": "sklearn:iris", "validation_split": 0.2, "batch_size": 16})
    generate(spec, framework).write(tmp_path)
    proc = subprocess.run([sys.executable, "train.py", "--calibrate", "2"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "calibration.json").read_text(encoding="utf-8"))
    timed = {k: result.get(k) for k in ("val_first_s", "val_s", "checkpoint_first_s", "checkpoint_s", "end_s")}
    assert all(isinstance(v, float) and v > 0 for v in timed.values()), result
    assert result["val_samples"] == 30 and result["steps"] == 2
    assert isinstance(result["epoch_s"], float) and result["epoch_s"] >= 0  # an epoch's start beyond a step
    assert not (tmp_path / "calibration-probe").exists()  # both checkpoints and the model were removed
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "result.json").exists()
    # what the calibration job makes of it: both figures of each, for the estimate (schedulers/estimate.py)
    terms = whole_run_terms(result, JobStatus("1", RunState.COMPLETED, started=100.0, ended=200.0), 100.0, 200.0)
    assert {k: terms[k] for k in timed} == timed and terms["val_samples"] == 30
    assert terms["epoch_s"] == result["epoch_s"]


def test_epoch_starts_among_the_timed_steps_are_taken_out_of_the_steps_time(tmp_path: Path) -> None:
    """A calibration of a small epoch's graph times steps across epoch starts (400 steps of a 23-step epoch cross 17):
    were the starts left in the steps' time, the estimate would count them again with its per-epoch term. 10 steps in
    1.4 s with 2 starts, a start and its step alone 0.3 s: steps of 0.1 s and starts of 0.2 s beyond a step."""
    generate(spec_with_data({"source": "sklearn:iris", "batch_size": 16}), "torch").write(tmp_path)
    cases = [(1.0, 10, 0, 0.3), (1.4, 10, 2, 0.3), (1.0, 10, 6, 0.5), (0.5, 10, 2, 0.9)]
    code = f"import json, runtime; print(json.dumps([runtime.epoch_split(*a) for a in {cases!r}]))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    split = json.loads(proc.stdout)
    assert split[0] == pytest.approx([0.1, 0.2])  # no start among the steps
    assert split[1] == pytest.approx([0.1, 0.2])  # 10 x 0.1 + 2 x 0.2 = 1.4
    assert split[2] == pytest.approx([0.1, 0.0])  # epochs of one or two steps: the steps hold their starts
    assert split[3] == pytest.approx([0.05, 0.0])  # a start timed longer than the steps allow: not counted apart
