"""One spec trains on the same batches in the same order in every framework (issue 22).

The epoch order is one numpy generator keyed by (seed, epoch), written once in runtime.py. Each
program records the samples it trained on in every epoch (shares/rank-0.jsonl: count and SHA-256 of
the indices, in order; shares/rank-0.npy: the latest epoch's indices), taken from the very batches
its Trainer iterates; the three programs must write the same records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.codegen import generate
from core.mapping.base import FRAMEWORKS
from core.spec import PipelineSpec

pytestmark = pytest.mark.frameworks

ENV = {**os.environ, "OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2",
       "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}


def small_mlp(**data: object) -> PipelineSpec:
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["data"].update(data)
    doc["training"].update({"epochs": 2, "samples_per_epoch": 300, "log_every_steps": 1000})
    return PipelineSpec.model_validate(doc)


def shares(spec: PipelineSpec, framework: str, folder: Path) -> tuple[list[dict], np.ndarray]:
    """Train `spec` for its two epochs; the per-epoch share records and the last epoch's indices."""
    generate(spec, framework).write(folder)
    proc = subprocess.run([sys.executable, "train.py", "--resume", "never"], cwd=folder, env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in (folder / "shares" / "rank-0.jsonl").read_text().splitlines()]
    return lines, np.load(folder / "shares" / "rank-0.npy")


def test_the_three_programs_train_on_the_same_batches_in_the_same_order(tmp_path: Path) -> None:
    spec = small_mlp(batch_size=32)
    runs = {fw: shares(spec, fw, tmp_path / fw) for fw in FRAMEWORKS}
    torch_lines, torch_last = runs["torch"]
    assert [line["epoch"] for line in torch_lines] == [0, 1]
    assert [line["samples"] for line in torch_lines] == [300, 300]  # samples_per_epoch, 10 batches (the last of 12)
    assert torch_lines[0]["sha256"] != torch_lines[1]["sha256"], "each epoch has its own order"
    assert len(set(torch_last.tolist())) == len(torch_last), "an epoch of 300 of 1,437 samples repeats none"
    for framework, (lines, last) in runs.items():
        assert lines == torch_lines, f"{framework} trained on other batches than torch"
        assert np.array_equal(last, torch_last), framework
