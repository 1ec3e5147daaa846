"""``python -m flowtrain predict`` on a segmentation run, and its refusal of a language model.

A tiny segmentation run (the unet template's data layer on 16×16 example shapes, a two-convolution
net, torch, a few steps) completes with its ``model.onnx``; predict then writes one PNG mask per
validation image, and the pixel accuracy of those masks against the true masks must equal the
validation pixel accuracy the training program reported, which only holds if predict reads and
preprocesses the images as training did and takes the argmax of the same model's scores. torch's own
model gives the same masks; an image of another size gets a mask of its own size; inputs without
pixels, or of other channels, are refused saying what the model takes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from core import zoo
from core.example_data import write_example_data
from core.spec import PipelineSpec
from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, REPO, cli_env, flowtrain
from tests.helpers import wait_until

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

NAME = "shapes_predict"
CLASSES = 4
FINAL = ("COMPLETED", "FAILED", "CANCELLED")


def _spec(source: str) -> PipelineSpec:
    doc = zoo.template("unet").model_dump(mode="json")
    doc["name"] = NAME
    doc["data"].update(input_shape=[3, 16, 16], batch_size=8, num_workers=0, validation_split=0.25, source=source)
    nodes = [{"id": "input", "op": "Input"},
             {"id": "conv", "op": "Conv2d", "params": {"out_channels": 8, "kernel_size": 3, "padding": 1}},
             {"id": "relu", "op": "ReLU"},
             {"id": "head", "op": "Conv2d", "params": {"out_channels": CLASSES, "kernel_size": 1}},
             {"id": "output", "op": "Output"}]
    chain = [n["id"] for n in nodes]
    doc["model"] = {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(chain, chain[1:])]}
    doc["training"].update(framework="torch", epochs=2, log_every_steps=2, optimizer={"name": "adam", "lr": 0.05})
    doc["training"]["resources"].update(cpus_per_task=1, gpus_per_node=0, partition=None)
    return PipelineSpec.model_validate(doc)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed local segmentation run (torch) on 32 example images with masks, 8 of them validation."""
    tmp = tmp_path_factory.mktemp("predict-seg")
    write_example_data(_spec("shapes"), tmp, record=tmp / "example-data.json", samples=32)
    spec = tmp / "spec.json"
    spec.write_text(_spec(str(tmp / "shapes")).to_json())
    env = cli_env(tmp / "home", tmp)
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    registry = RunRegistry(home=tmp / "home")
    [run] = registry.list_runs(ME)
    assert run.state == RunState.COMPLETED and (run.run_dir / "model.onnx").is_file(), registry.history(run.id)
    return {"env": env, "tmp": tmp, "run": run, "result": registry.result(run.id)}


def _validation_images(trained: dict[str, Any]) -> list[Path]:
    """The run's validation images, by its own data.py's split of the sorted image files."""
    run = trained["run"]
    spec = importlib.util.spec_from_file_location("predict_seg_data", run.run_dir / "data.py")
    assert spec is not None and spec.loader is not None
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    images = sorted((trained["tmp"] / "shapes" / "images").iterdir())
    return [images[i] for i in data.split_indices(len(images))["val"]]


def _mask(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        assert image.mode == "L", image.mode  # one channel of class indices
        return np.asarray(image)


def test_masks_of_the_validation_images_reproduce_the_reported_pixel_accuracy(trained: dict[str, Any]) -> None:
    tmp, images = trained["tmp"], _validation_images(trained)
    out = tmp / "val-masks"
    given = [os.path.relpath(image, REPO) for image in images]  # relative to the command's folder, as typed
    done = flowtrain(trained["env"], "predict", NAME, *given, "--batch", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"run {trained['run'].id} ({NAME}): {len(images)} image(s) through model.onnx")
    assert lines[1] == (f"{out}: {len(images)} mask(s), PNG files of class indices 0-{CLASSES - 1} (one per image, "
                        f"its size); pixels per class in {out / 'masks.jsonl'}")
    masks = [_mask(out / f"{image.stem}.png") for image in images]
    truth = [_mask(tmp / "shapes" / "masks" / f"{image.stem}.png") for image in images]
    correct = sum(int(np.sum(m == t)) for m, t in zip(masks, truth, strict=True))
    accuracy = correct / sum(t.size for t in truth)
    assert accuracy == pytest.approx(trained["result"]["val_pixel_accuracy"], abs=1e-9)
    records = [json.loads(line) for line in (out / "masks.jsonl").read_text().splitlines()]
    assert [r["input"] for r in records] == given
    assert [list(r["pixels"].values()) for r in records] == [np.bincount(m.reshape(-1), minlength=CLASSES).tolist()
                                                             for m in masks]
    assert all((r["height"], r["width"]) == (16, 16) for r in records)


def test_models_lists_a_segmentation_run_by_its_mean_iou(trained: dict[str, Any]) -> None:
    listed = flowtrain(trained["env"], "models", "--json")
    assert listed.returncode == 0, listed.stderr
    [model] = json.loads(listed.stdout)
    assert model["metric"] == f"val_mIoU {trained['result']['val_mIoU']:.4f}"


def test_torch_gives_the_same_masks_and_a_larger_image_its_own_size(trained: dict[str, Any]) -> None:
    tmp, images = trained["tmp"], _validation_images(trained)[:3]
    with Image.open(images[0]) as image:
        image.resize((40, 24)).save(tmp / "wide.png")  # width 40, height 24
    given = [*map(str, images), str(tmp / "wide.png")]
    torch = flowtrain(trained["env"], "predict", NAME, *given, "--out", str(tmp / "torch"), "--framework", "torch")
    onnx = flowtrain(trained["env"], "predict", NAME, *given)  # without --out: pixels per class, no files
    assert onnx.returncode == 0 and torch.returncode == 0, onnx.stderr + torch.stderr
    first = torch.stdout.splitlines()[0]
    assert "4 image(s) through torch's model/model.pt (largest output difference from model.onnx: " in first
    assert "the same class at every pixel on 4 of 4 images" in first
    difference = float(re.search(r"largest output difference from model.onnx: ([0-9.e+-]+)", first).group(1))
    assert difference < 1e-4
    lines = onnx.stdout.splitlines()
    assert lines[1].startswith("1 image(s) of another size than the model's input (16x16, height x width) were "
                               "resized to it")
    assert lines[2].split() == ["input", "height", "width", "class_0", "class_1", "class_2", "class_3"]
    masks = [_mask(tmp / "torch" / f"{Path(name).stem}.png") for name in given]
    assert masks[-1].shape == (24, 40)  # the wide image's own size
    assert [line.split() for line in lines[3:7]] == [
        [name, *map(str, m.shape), *map(str, np.bincount(m.reshape(-1), minlength=CLASSES))]
        for name, m in zip(given, masks, strict=True)]
    assert lines[7] == "pixels per class of each image's mask; give --out DIR to write the masks as PNG files"
    assert not (tmp / "onnx").exists()


def _refused(trained: dict[str, Any], *args: str) -> str:
    done = flowtrain(trained["env"], "predict", NAME, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: ")
    return done.stderr


def test_inputs_without_the_models_pixels_are_refused(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    image = _validation_images(trained)[0]
    (tmp / "rows.csv").write_text("a,b\n1,2\n")
    message = _refused(trained, str(tmp / "rows.csv"))
    assert f"{tmp / 'rows.csv'}: a segmentation run labels the pixels of images" in message
    assert "not .csv" in message and "shape (N, 3, 16, 16)" in message
    with Image.open(image) as opened:
        opened.convert("L").save(tmp / "grey.png")
        opened.convert("RGBA").save(tmp / "rgba.png")
    message = _refused(trained, str(tmp / "grey.png"), str(image), str(tmp / "rgba.png"), "--out", str(tmp / "no"))
    assert message.startswith("error: 2 image(s) have other channels than the model, which takes 3 (RGB): "
                              f"{tmp / 'grey.png'} (L: 1 channel(s)); {tmp / 'rgba.png'} (RGBA: 4 channel(s))")
    assert not (tmp / "no").exists()  # nothing written
    assert "--out names a folder" in _refused(trained, str(image), "--out", str(tmp / "masks.jsonl"))
    message = _refused(trained, str(image), "--out", str(image.parent))
    assert f"the mask {image} would replace the input image" in message


def test_a_language_model_is_refused_pointing_to_sample(tmp_path: Path) -> None:
    """The refusal depends on the run's task only, not on its state: the run's corpus is removed as soon
    as the run is submitted, so that it fails when it loads its data instead of training."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat " * 100)
    doc = zoo.template("gpt_mini").model_dump(mode="json")
    doc["data"].update(source=str(corpus), block_size=16, num_workers=0)
    doc["training"].update(framework="torch", epochs=1)
    doc["training"]["resources"]["cpus_per_task"] = 1
    (tmp_path / "spec.json").write_text(json.dumps(doc))
    env = cli_env(tmp_path / "home", tmp_path)
    started = flowtrain(env, "run", str(tmp_path / "spec.json"), "--scheduler", "local", "--json")
    corpus.unlink()
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["id"]
    done = flowtrain(env, "predict", "gpt_mini", "prompt.txt")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.startswith(f"error: run {run_id} (gpt_mini) is a language model (data.task "
                                  "language_modeling)")
    assert f"`python -m flowtrain sample {run_id} --prompt-ids IDS --tokens N`" in done.stderr
    wait_until(lambda: json.loads(flowtrain(env, "status", run_id, "--json").stdout)["state"] in FINAL,
               timeout=120, message="the language model's run to end")
