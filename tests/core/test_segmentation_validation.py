"""Segmentation's bad input is a problem before any job: a spec that cannot train on masks (every
problem at once, naming the field or the node), and masks that do not fit their images or name a class
the model cannot predict, each named by file (image folder) or by sample (.npz)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.errors import SpecError
from core.segmentation_data import mask_problems
from core.spec import DataSpec, PipelineSpec
from core.validate import validate
from core.zoo.builder import GraphBuilder
from schedulers.launch import check
from settings import load_settings
from settings.access import os_user


def _tiny(data: dict, training: dict, out_channels: int = 3) -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input", shape=[3, 8, 8])
    g.add("Output", g.add("Conv2d", x, id="head", out_channels=out_channels, kernel_size=1), id="output")
    return g.spec("seg", "", {"source": "shapes", "format": "image_folder", "input_shape": [3, 8, 8],
                              "task": "segmentation", **data}, training)


def test_a_segmentation_spec_validates_when_the_model_predicts_every_class_at_every_pixel() -> None:
    analysis = validate(_tiny({"num_classes": 3, "ignore_index": 255}, {"loss": "cross_entropy"}))
    assert analysis.nodes["output"].output.shape == (3, 8, 8)


def test_a_spec_that_cannot_train_on_masks_names_every_problem_at_once() -> None:
    with pytest.raises(SpecError) as err:
        validate(_tiny({"num_classes": 4}, {"loss": "mse"}))
    by_location = {p.location: p for p in err.value.problems}
    assert by_location["training.loss"].received == "mse" and by_location["training.loss"].fix
    head = by_location["model.nodes[output].inputs"]
    assert head.node == "output" and head.received == "3×8×8" and head.expected.startswith("4×8×8")
    with pytest.raises(SpecError) as err:
        validate(_tiny({"num_classes": None}, {"loss": "cross_entropy"}))
    assert [p.location for p in err.value.problems] == ["data.num_classes"]
    classifier = _tiny({"task": "classification", "ignore_index": 255, "num_classes": 3},
                       {"loss": "cross_entropy_dice"})
    with pytest.raises(SpecError) as err:
        validate(classifier)
    assert {"data.ignore_index", "training.loss"} <= {p.location for p in err.value.problems}
    validate(_tiny({"num_classes": 3}, {"loss": "cross_entropy_dice"}))  # the Dice option is segmentation's


def _png(path: Path, pixels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def test_masks_that_do_not_fit_their_images_are_named_by_file(tmp_path: Path) -> None:
    images, masks = tmp_path / "shapes" / "images", tmp_path / "shapes" / "masks"
    rgb = np.zeros((8, 8, 3), np.uint8)
    for stem in ("a", "b", "c", "d"):
        _png(images / f"{stem}.png", rgb)
    _png(masks / "a.png", np.full((8, 8), 255, np.uint8))  # all ignored: fine
    _png(masks / "b.png", np.zeros((6, 8), np.uint8))  # 6 rows, its image 8
    bad = np.zeros((8, 8), np.uint8)
    bad[0, :3] = (2, 3, 7)  # 3 classes: 3 and 7 are no class
    _png(masks / "c.png", bad)  # and d has no mask
    data = DataSpec(source=str(tmp_path / "shapes"), format="image_folder", task="segmentation", num_classes=3,
                    ignore_index=255)
    problems = {p.message.split(":")[0].split(" ")[0]: p for p in mask_problems(data, tmp_path / "shapes")}
    assert set(problems) == {str(masks / "b.png"), str(masks / "c.png"), str(images / "d.png")}
    size = problems[str(masks / "b.png")]
    assert "size differs" in size.message and size.received.startswith("6×8") and size.expected.startswith("8×8")
    values = problems[str(masks / "c.png")]
    assert values.location == "data.num_classes" and values.received == "3, 7" and "ignore index 255" in values.expected
    assert "has no mask" in problems[str(images / "d.png")].message


def test_a_bad_npz_mask_is_named_by_sample_and_refused_before_any_job(tmp_path: Path) -> None:
    data_root = tmp_path / "data"
    data_root.mkdir()
    masks = np.zeros((3, 8, 8), np.int64)
    masks[1, 4, 4] = 5
    np.savez(data_root / "seg.npz", x=np.zeros((3, 8, 8, 3), np.float32), y=masks)
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data_root}"]\n', encoding="utf-8")
    spec = _tiny({"num_classes": 3, "source": "seg.npz", "format": "npz"}, {"loss": "cross_entropy"})
    with pytest.raises(SpecError) as err:
        check(spec, os_user(), load_settings(config, environ={}))
    [problem] = err.value.problems
    assert problem.message.startswith(f"{data_root / 'seg.npz'}: y[1]: mask values that are no class")
    assert problem.received == "5" and problem.expected == "class indices 0–2"


def test_a_segmentation_run_with_fitting_masks_passes_the_submission_check(tmp_path: Path) -> None:
    """The programs train on masks now (tests/frameworks/test_segmentation_training.py): no refusal of the task."""
    from core import zoo
    from core.example_data import record_path, write_example_data

    spec = zoo.template("unet")
    write_example_data(spec, tmp_path / "data", record=record_path(tmp_path / "home", "alice"), samples=4)
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{tmp_path / "data"}"]\n', encoding="utf-8")
    checked = check(spec, os_user(), load_settings(config, environ={}))
    assert checked.spec.data.task == "segmentation" and checked.spec.data.source.startswith(str(tmp_path / "data"))
