"""The vision transformers of the zoo: vit_cifar trains a few steps from its example data in every
framework (ViT-B/16 is only validated and counted: tests/core/test_zoo.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from core.codegen import generate
from core.example_data import write_example_data
from core.mapping.base import FRAMEWORKS
from core.spec import PipelineSpec

pytestmark = pytest.mark.frameworks

PYTHON = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vit-data")
    write_example_data(zoo.template("vit_cifar"), root, record=root.parent / "vit-record.json", samples=40)
    return root / "cifar10" / "train"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_small_vit_trains_a_few_steps_from_its_example_data(framework: str, cifar: Path, tmp_path: Path) -> None:
    doc = zoo.template("vit_cifar").model_dump(mode="json")
    doc["data"].update(source=str(cifar), batch_size=8, validation_split=0.25, num_workers=0)
    doc["training"].update(framework=framework, epochs=1, samples_per_epoch=24, log_every_steps=1,
                           checkpoint={"every_epoch": False, "every_steps": None})
    generate(PipelineSpec.model_validate(doc), framework).write(tmp_path)
    result = subprocess.run([PYTHON, "train.py", "--out", "out"], cwd=tmp_path, env=ENV, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "result.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3, summary
    assert math.isfinite(summary["val_loss"]) and 0 <= summary["val_accuracy"] <= 1, summary
