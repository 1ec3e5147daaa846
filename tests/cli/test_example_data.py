"""``python -m flowtrain example-data``: the zoo's templates that name data a fresh portal lacks become
runnable as shipped once their example data is under a data root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.validate import validate
from portal.data_needs import data_problem
from portal.dataprobe import probe
from tests.data.fixtures import load_data_module

ROOT = Path(__file__).resolve().parents[2]
NEEDS_DATA = sorted(e.name for e in zoo.entries() if not zoo.template(e.name).data.source.startswith("sklearn:"))


def example_data(name: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWTRAIN_HOME": str(out.with_name(out.name + "-home"))}  # the record of what was written
    env.pop("FLOWTRAIN_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "flowtrain", "example-data", name, "--out", str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env=env)


def test_every_template_without_a_builtin_dataset_gets_example_data(tmp_path: Path) -> None:
    assert NEEDS_DATA == ["alexnet", "gpt2_small", "gpt_mini", "lstm_text_classifier", "mobilenet_v2", "resnet18",
                          "resnet18_cifar", "resnet50", "transformer_text_classifier", "unet", "vgg16", "vit_b_16",
                          "vit_cifar"]
    for name in NEEDS_DATA:
        data = zoo.template(name).data.model_dump(mode="json")
        assert data_problem(data, [tmp_path]) is not None  # "needs your data" before
    for name in ("resnet18", "resnet18_cifar", "lstm_text_classifier", "unet", "gpt2_small", "gpt_mini"):  # the layouts
        result = example_data(name, tmp_path, "--samples", "20")
        assert result.returncode == 0, result.stderr
        assert f"with {tmp_path} among your data roots" in result.stdout
    for name in NEEDS_DATA:
        assert data_problem(zoo.template(name).data.model_dump(mode="json"), [tmp_path]) is None, name
    imagenet = probe("imagenet/train", [tmp_path])
    assert (imagenet.size, imagenet.num_classes, imagenet.sample_shape) == (1000, 1000, (3, 224, 224))


@pytest.mark.parametrize("name", ["resnet18_cifar", "lstm_text_classifier"])
def test_the_generated_program_loads_the_example_data(name: str, tmp_path: Path) -> None:
    result = example_data(name, tmp_path / "root")
    assert result.returncode == 0, result.stderr
    spec = zoo.template(name)
    splits = load_data_module(spec, tmp_path / "program", validate(spec), root=tmp_path / "root").load_splits()
    train = splits["train"]
    assert len(train) + len(splits["val"]) == 300
    assert len(np.unique(train.y)) == spec.data.num_classes


def test_a_builtin_dataset_needs_no_example_data(tmp_path: Path) -> None:
    result = example_data("mnist_cnn", tmp_path)
    assert result.returncode == 2 and "is a built-in dataset: it needs no example data" in result.stderr


def test_data_that_is_not_example_data_is_never_overwritten(tmp_path: Path) -> None:
    mine = tmp_path / "cifar10" / "train" / "cat"
    mine.mkdir(parents=True)
    result = example_data("resnet18_cifar", tmp_path)
    assert result.returncode == 2, result.stdout
    assert f"{mine.parent} already exists and is not FlowTrain example data; it is left as it is" in result.stderr
    assert [p.name for p in mine.parent.iterdir()] == ["cat"]


def test_writing_again_keeps_and_names_a_file_changed_since(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert example_data("resnet18_cifar", root, "--samples", "20").returncode == 0
    edited = root / "cifar10" / "train" / "class5" / "000015.jpg"
    edited.write_bytes(b"mine now")
    result = example_data("resnet18_cifar", root, "--samples", "10")
    assert result.returncode == 0, result.stderr
    assert f"kept {edited}: FlowTrain wrote it earlier, but it has changed since" in result.stdout
    assert edited.read_bytes() == b"mine now"
    assert (tmp_path / "root-home" / "example-data").is_dir()
