"""Datasets larger than memory: the generated programs stream image folders in every framework.

- Bounded memory: training over a ~1.5 GB folder of JPEGs (about 3 GB as the model's float32
  input) grows the program's process tree by less than GROWTH_LIMIT more than the same program
  over a small folder does.
- Every ImageNet-shaped zoo template trains a step from a generated 1,000-class folder (each in one
  framework, every framework at least once: TRAINED_IN).
- Two ranks take disjoint shares of each epoch that together make it up (shares/rank-R.npy).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.spec import PipelineSpec
from tests.data.fixtures import spec_with_data, write_shards
from tests.frameworks.groups import COUNTED_ONLY
from tests.frameworks.streaming import (
    FRAMEWORKS,
    PYTHON,
    PeakMemory,
    random_jpegs,
    run,
    small_cnn,
    write_jpegs,
    write_program,
)
from tests.frameworks.two_ranks import launch_two_ranks

pytestmark = [pytest.mark.frameworks, pytest.mark.streaming]

GROWTH_LIMIT = 400 * 2**20
BIG_BYTES = 1536 * 2**20
SIDE = 224  # the model's input: 3 × 224 × 224 float32 = 588 KiB a sample


@pytest.fixture(scope="session")
def big_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """About 1.5 GB of 512 × 512 random JPEGs in 10 class folders, and the number of images."""
    root = tmp_path_factory.mktemp("big") / "images"
    per_class = -(-BIG_BYTES // len(random_jpegs(1, 512)[0]) // 10)
    assert write_jpegs(root, 10, per_class, 512) >= BIG_BYTES
    return root, 10 * per_class


@pytest.fixture(scope="session")
def small_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small") / "images"
    write_jpegs(root, 10, 8, 512)
    return root


def measured_run(spec: PipelineSpec, framework: str, folder: Path) -> tuple[int, str]:
    """(peak memory of the program's process tree, its stderr); the run must succeed."""
    write_program(spec, framework, folder)
    monitor = PeakMemory([PYTHON, "train.py", "--out", "out"], folder)
    code, out, err = monitor.wait(timeout=300)
    assert code == 0, err[-3000:]
    assert "streamed" in out and monitor.samples > 10, out
    return monitor.peak, out


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_training_over_a_folder_larger_than_memory_keeps_memory_bounded(
        framework: str, big_folder: tuple[Path, int], small_folder: Path, tmp_path: Path) -> None:
    root, images = big_folder
    decoded = images * 3 * SIDE * SIDE * 4
    assert decoded > 6 * GROWTH_LIMIT  # held in memory, the samples would break the limit many times over
    training = {"samples_per_epoch": 160}
    small, _ = measured_run(small_cnn(small_folder, 10, SIDE, framework, training=training), framework,
                            tmp_path / "small")
    big, out = measured_run(small_cnn(root, 10, SIDE, framework, training=training), framework, tmp_path / "big")
    assert f"train: {images} samples" in out
    growth = big - small
    print(f"{framework}: peak {big / 2**20:.0f} MiB over {images} images ({decoded / 2**30:.1f} GiB decoded), "
          f"{small / 2**20:.0f} MiB over 80; growth {growth / 2**20:.0f} MiB")
    assert growth < GROWTH_LIMIT, f"the process tree grew by {growth / 2**20:.0f} MiB"
    result = json.loads((tmp_path / "big" / "out" / "result.json").read_text())
    assert result["status"] == "completed" and result["steps"] == 10


# --------------------------------------------------------------------------- the ImageNet zoo templates


IMAGENET = sorted(e.name for e in zoo.entries()
                  if zoo.template(e.name).data.num_classes == 1000 and zoo.template(e.name).data.format == "image_folder"
                  and e.name not in COUNTED_ONLY)


@pytest.fixture(scope="session")
def thousand_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet") / "train"
    write_jpegs(root, 1000, 1, 48)
    return root


# Each ImageNet template trains its step in one framework, and each framework trains at least one: the
# streamed image folder is the same data layer whatever the model (every framework streams folders in the
# tests above and below), and each template's model computes the same function in all three frameworks
# (tests/frameworks/test_equivalence.py: AlexNet at 224×224, ResNet-18/50 and MobileNet v2 at 64×64; VGG-16's
# ops are all AlexNet's). Fifteen pairs trained the same data path fifteen times at ~10-25 s each.
TRAINED_IN = {"alexnet": "paddle", "mobilenet_v2": "keras", "resnet18": "keras", "resnet50": "paddle",
              "vgg16": "torch"}


def test_the_imagenet_templates_are_the_expected_ones() -> None:
    assert IMAGENET == ["alexnet", "mobilenet_v2", "resnet18", "resnet50", "vgg16"]
    assert sorted(TRAINED_IN) == IMAGENET and set(TRAINED_IN.values()) == set(FRAMEWORKS)


@pytest.mark.parametrize(("name", "framework"), sorted(TRAINED_IN.items()))
def test_imagenet_template_trains_from_a_streamed_folder(name: str, framework: str, thousand_classes: Path,
                                                         tmp_path: Path) -> None:
    doc = zoo.template(name).model_dump(mode="json")
    doc["data"].update(source=str(thousand_classes), loading="stream", batch_size=2, validation_split=0.0,
                       num_workers=1)
    doc["training"].update(framework=framework, epochs=1, samples_per_epoch=2, log_every_steps=1,
                           checkpoint={"every_epoch": False, "every_steps": None})
    folder = write_program(PipelineSpec.model_validate(doc), framework, tmp_path)
    result = run(folder, "--out", "out", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: 1000 samples" in result.stdout and "streamed" in result.stdout
    summary = json.loads((folder / "out" / "result.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 1


# --------------------------------------------------------------------------- ranks take disjoint shares


@pytest.mark.ddp
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_ranks_take_disjoint_shares_that_cover_each_epoch(framework: str, small_folder: Path,
                                                              tmp_path: Path) -> None:
    spec = small_cnn(small_folder, 10, 32, framework, data={"batch_size": 4, "num_workers": 1},
                     training={"epochs": 2})
    folder = write_program(spec, framework, tmp_path / "program")
    out = tmp_path / "out"
    launch_two_ranks(framework, folder, out)
    shares = [np.load(out / "shares" / f"rank-{r}.npy") for r in (0, 1)]
    assert len(shares[0]) == len(shares[1]) == 40  # 80 training images, half each
    assert not set(shares[0].tolist()) & set(shares[1].tolist())
    assert sorted(np.concatenate(shares).tolist()) == list(range(80))
    for r in (0, 1):
        lines = [json.loads(line) for line in (out / "shares" / f"rank-{r}.jsonl").read_text().splitlines()]
        assert [line["epoch"] for line in lines] == [0, 1] and all(line["samples"] == 40 for line in lines)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["world_size"] == 2 and rows[-1]["status"] == "completed"


# --------------------------------------------------------------------------- memory-mapped arrays and tar shards


def array_and_shard_sources(root: Path) -> dict[str, dict[str, object]]:
    """A .npy array (channels last) with y.npy, and WebDataset shards: 48 images of 3 × 16 × 16 each."""
    rng = np.random.default_rng(0)
    labels = [i % 4 for i in range(48)]
    np.save(root / "x.npy", rng.integers(0, 256, (48, 16, 16, 3), np.uint8))
    np.save(root / "y.npy", np.asarray(labels))
    write_shards(root / "shards", labels, per_shard=16, size=16)
    return {"npy": {"source": str(root / "x.npy"), "format": "npy"}, "webdataset": {"source": str(root / "shards"),
                                                                   "format": "webdataset"}}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_npy_and_webdataset_sources_train_streamed(framework: str, tmp_path: Path) -> None:
    for fmt, data in array_and_shard_sources(tmp_path).items():
        spec = small_cnn(tmp_path, 4, 16, framework, data={**data, "batch_size": 8, "validation_split": 0.25,
                                                           "preprocessing": [{"op": "scale"}, {"op": "normalize"}]},
                         training={"epochs": 2})
        folder = write_program(spec, framework, tmp_path / fmt)
        result = run(folder, "--out", "out")
        assert result.returncode == 0, f"{fmt}: {result.stderr[-3000:]}"
        assert "train: 36 samples" in result.stdout and "streamed" in result.stdout, result.stdout
        summary = json.loads((folder / "out" / "result.json").read_text())
        assert summary["status"] == "completed" and summary["steps"] == 2 * 5 and "val_accuracy" in summary


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_parquet_streams_by_row_group(framework: str, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    labels = np.arange(64) % 2
    pq.write_table(pa.table({"a": rng.normal(size=64) + labels, "b": rng.normal(size=64), "label": labels}),
                   tmp_path / "t.parquet", row_group_size=10)
    doc = spec_with_data({"source": str(tmp_path / "t.parquet"), "num_classes": 2, "input_shape": [2],
                          "batch_size": 8, "validation_split": 0.25, "loading": "stream", "num_workers": 1,
                          "preprocessing": [{"op": "standardize"}]}).model_dump(mode="json")
    doc["training"].update(framework=framework, epochs=2, checkpoint={"every_epoch": False, "every_steps": None})
    folder = write_program(PipelineSpec.model_validate(doc), framework, tmp_path / "program")
    result = run(folder, "--out", "out")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: 48 samples" in result.stdout and "streamed" in result.stdout, result.stdout
    summary = json.loads((folder / "out" / "result.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 2 * 6


# --------------------------------------------------------------------------- resuming in the middle of an epoch


def train_losses(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if r["event"] == "train"}


@pytest.mark.resume
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_streamed_run_resumed_mid_epoch_continues_at_the_right_sample(framework: str, small_folder: Path,
                                                                         tmp_path: Path) -> None:
    """Epochs of 10 steps with a checkpoint every 3: a run stopped after step 7 resumes from step 6 and
    logs the same losses from there on as a run that was never stopped (same samples, same order)."""
    spec = small_cnn(small_folder, 10, 32, framework, data={"batch_size": 8, "augmentation": []},
                     training={"epochs": 2, "checkpoint": {"every_steps": 3, "every_epoch": True}})
    whole = write_program(spec, framework, tmp_path / "whole")
    assert run(whole, "--out", "out").returncode == 0
    parts = write_program(spec, framework, tmp_path / "parts")
    first = run(parts, "--out", "out", "--max-steps", "7")
    assert first.returncode == 0, first.stderr[-3000:]
    second = run(parts, "--out", "out")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stdout and "(step 6, epoch 1)" in second.stdout, second.stdout
    expected, resumed = train_losses(whole / "out"), train_losses(parts / "out")
    after = [step for step in expected if step > 6]
    assert after == [8, 10, 12, 14, 16, 18, 20]
    for step in after:
        assert resumed[step] == pytest.approx(expected[step], rel=1e-4, abs=1e-6), step
