"""A segmentation run end to end in every framework: a small U-Net-shaped net (one level, a CropConcat skip,
every convolution from He's initialisation as in the zoo's unet) trains two epochs on the example data of
coloured shapes, read from WebDataset shards of KEY.png with KEY.mask.png (the unet template's data layer at
32×32: scaled and normalised per channel, horizontal flips through segment_augment), learns to segment them
(validation mIoU above 0.8, where any constant guess is at most 0.25), and records pixel accuracy and mean
IoU from the confusion matrix summed over each epoch, in its epoch records and result.json. One subprocess
per framework; with two ranks (each framework's own launcher) the mIoU is the whole validation set's."""

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
from core.example_data import write_example_data
from core.mapping.base import FRAMEWORKS
from core.spec import PipelineSpec
from tests.frameworks.two_ranks import launch_two_ranks

pytestmark = pytest.mark.frameworks

PYTHON = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}
HE = {"init": "he"}  # the zoo's unet starts every convolution so: N(0, 2/fan_in), zero biases
LAYERS = [("enc_conv", "Conv2d", {"out_channels": 8, "kernel_size": 3, "padding": 1, **HE}), ("enc_relu", "ReLU", {}),
          ("pool", "MaxPool2d", {"kernel_size": 2}),
          ("mid_conv", "Conv2d", {"out_channels": 16, "kernel_size": 3, "padding": 1, **HE}), ("mid_relu", "ReLU", {}),
          ("up", "ConvTranspose2d", {"out_channels": 8, "kernel_size": 2, "stride": 2, **HE})]


def _spec(root: Path, framework: str, epochs: int = 2) -> PipelineSpec:
    doc = zoo.template("unet").model_dump(mode="json")
    doc["data"].update(input_shape=[3, 32, 32], batch_size=4, num_workers=0, validation_split=0.25, source="shards",
                       format="webdataset")  # KEY.png with KEY.mask.png (flowtrain example-data writes them)
    if root.exists():
        doc["data"]["source"] = str(root / "shards")
    nodes = [{"id": "input", "op": "Input"}] + [{"id": i, "op": op, "params": p} for i, op, p in LAYERS]
    nodes += [{"id": "skip", "op": "CropConcat"},
              {"id": "dec_conv", "op": "Conv2d", "params": {"out_channels": 8, "kernel_size": 3, "padding": 1, **HE}},
              {"id": "dec_relu", "op": "ReLU"},
              {"id": "head", "op": "Conv2d", "params": {"out_channels": 4, "kernel_size": 1, **HE}},
              {"id": "output", "op": "Output"}]
    chain = ["input", *(i for i, _, _ in LAYERS)]
    edges = [{"source": a, "target": b} for a, b in zip(chain, chain[1:], strict=False)]
    edges += [{"source": "enc_relu", "target": "skip", "port": 0}, {"source": "up", "target": "skip", "port": 1},
              {"source": "skip", "target": "dec_conv"}, {"source": "dec_conv", "target": "dec_relu"},
              {"source": "dec_relu", "target": "head"}, {"source": "head", "target": "output"}]
    doc["model"] = {"nodes": nodes, "edges": edges}
    doc["training"].update(framework=framework, epochs=epochs, log_every_steps=4, optimizer={"name": "adam", "lr": 0.01})
    return PipelineSpec.model_validate(doc)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("seg-data")
    write_example_data(_spec(root / "absent", "torch"), root, record=root.parent / "seg-record.json", samples=164)  # 41 validation images: 21 on rank 0, 20 on rank 1
    return root


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_small_unet_records_pixel_accuracy_and_mean_iou(framework: str, shapes: Path, tmp_path: Path) -> None:
    generate(_spec(shapes, framework), framework).write(tmp_path)
    result = subprocess.run([PYTHON, "train.py", "--out", "out"], cwd=tmp_path, env=ENV, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "result.json").read_text())
    assert summary["status"] == "completed", summary
    records = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    epochs = [r for r in records if r["event"] == "epoch"]
    assert {(r["epoch"], r["split"]) for r in epochs} == {(0, "train"), (0, "val"), (1, "train"), (1, "val")}, epochs
    for r in epochs:
        assert 0.0 <= r["mIoU"] <= 1.0 and 0.0 <= r["pixel_accuracy"] <= 1.0 and "accuracy" not in r, r
    assert records[0]["train_samples"] == 123  # 164 images with their masks from 2 shards, a quarter for validation
    # it learns to segment: one class predicted everywhere has IoU at most 1 and the others 0, so its mean over
    # the 4 classes is at most 0.25 (the background, ~81 % of the pixels: ~0.2). From He's initialisation (the
    # zoo's unet's) these 62 steps reached 0.935 (torch), 0.968 (keras), 0.95 (paddle); from torch's default
    # U(±1/√fan_in) 0.61, 0.94, 0.96, and on pixels scaled to [0, 1] without normalising 0.36, 0.36, 0.54
    assert summary["val_mIoU"] > 0.8, summary
    print(framework, {k: round(v, 3) for k, v in summary.items() if k.startswith("val_")})


# ------------------------------------------------------------------------------------------ data-parallel

# Runs train.main() as one of two ranks; each rank then predicts the whole validation set with its final model
# (every rank holds the same weights) into val-predictions-RANK.npz.
WHOLE_VALIDATION_SET = """
import os, sys
import numpy as np
import data, train
models = []
build = train.build_model
def spy(*args, **kwargs):
    models.append(build(*args, **kwargs))
    return models[-1]
train.build_model = spy
code = train.main(sys.argv[1:])
val = data.load_splits()["val"]
PREDICT
np.savez(f"val-predictions-{RANK}.npz", predicted=predicted, truth=val.y)
sys.exit(code)
"""
PREDICT = {  # the final model's classes for the validation images, and this process's rank
    "torch": """
import torch
RANK = os.environ["RANK"]
with torch.no_grad():
    predicted = models[0].eval()(torch.from_numpy(val.x)).argmax(1).numpy()
""",
    "keras": """
import model as network
RANK = os.environ["SLURM_PROCID"]
predicted = np.asarray(models[0](network.to_keras_layout(val.x), training=False)).argmax(1)
""",
    "paddle": """
import paddle
RANK = os.environ["PADDLE_TRAINER_ID"]
models[0].eval()
with paddle.no_grad():
    predicted = models[0](paddle.to_tensor(val.x)).argmax(1).numpy()
""",
}


def _mean_iou(truth: np.ndarray, predicted: np.ndarray, classes: int = 4) -> float:
    matrix = np.bincount(truth.reshape(-1) * classes + predicted.reshape(-1), minlength=classes * classes)
    matrix = matrix.reshape(classes, classes).astype(np.float64)
    union = matrix.sum(0) + matrix.sum(1) - np.diag(matrix)
    return float((np.diag(matrix)[union > 0] / union[union > 0]).mean())


@pytest.mark.ddp
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_ranks_report_the_mean_iou_of_the_whole_validation_set(framework: str, shapes: Path,
                                                                   tmp_path: Path) -> None:
    """Each rank evaluates every second validation image; the run's val_mIoU is that of the confusion
    matrix summed over both ranks: the whole set's, not the mean of the two ranks' mIoUs."""
    generate(_spec(shapes, framework, epochs=1), framework).write(tmp_path)
    (tmp_path / "whole_val.py").write_text(WHOLE_VALIDATION_SET.replace("PREDICT", PREDICT[framework]))
    launch_two_ranks(framework, tmp_path, tmp_path / "out", "whole_val.py", {**ENV, "OMP_NUM_THREADS": "1"})
    summary = json.loads((tmp_path / "out" / "result.json").read_text())
    start = json.loads((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()[0])
    assert start["world_size"] == 2 and summary["status"] == "completed", summary
    ranks = []
    for rank in (0, 1):
        with np.load(tmp_path / f"val-predictions-{rank}.npz") as arrays:
            ranks.append({name: arrays[name] for name in arrays.files})
    truth, predicted = ranks[0]["truth"], ranks[0]["predicted"]
    np.testing.assert_array_equal(ranks[1]["predicted"], predicted)  # one model: the ranks' weights are equal
    whole = _mean_iou(truth, predicted)
    per_rank = [_mean_iou(truth[rank::2], predicted[rank::2]) for rank in (0, 1)]
    assert summary["val_mIoU"] == pytest.approx(whole, abs=1e-9), (summary, whole, per_rank)
    assert abs(whole - sum(per_rank) / 2) > 1e-6, (whole, per_rank)  # else the test could not tell them apart
