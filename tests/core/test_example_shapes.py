"""Segmentation example data: coloured shapes with their masks, in each layout the data layer reads
(an image folder with a parallel mask folder, .npz, .npy, WebDataset shards), that pass the masks' own checks before a job
and label every shape's pixels with its class."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core import zoo
from core.example_data import record_path, write_example_data
from core.segmentation_data import mask_problems
from core.spec import PipelineSpec


def _unet(**data: object) -> PipelineSpec:
    spec = zoo.template("unet")
    return spec.model_copy(update={"data": spec.data.model_copy(update=data)})


@pytest.mark.parametrize("source, fmt", [("shapes", "image_folder"), ("shapes.npz", "npz"), ("seg/x.npy", "npy"),
                                         ("shards", "webdataset")])
def test_shapes_with_masks_are_written_in_every_layout_and_pass_the_mask_checks(source: str, fmt: str,
                                                                                tmp_path: Path) -> None:
    spec = _unet(source=source, format=fmt)
    written = write_example_data(spec, tmp_path / "root", record=record_path(tmp_path / "home", "alice"), samples=12)
    assert written.samples == 12 and "coloured shapes, 4 classes (64×64)" in written.detail
    assert mask_problems(spec.data, written.path) == []
    if fmt == "image_folder":
        image = np.asarray(Image.open(written.path / "images" / "000000.png"))
        mask = np.asarray(Image.open(written.path / "masks" / "000000.png"))
        assert image.shape == (64, 64, 3) and mask.shape == (64, 64) and mask.dtype == np.uint8
        masks = np.stack([np.asarray(Image.open(p)) for p in sorted((written.path / "masks").iterdir())])
    elif fmt == "webdataset":
        with tarfile.open(written.path / "shard-000000.tar") as tar:
            names = tar.getnames()
            masks = np.stack([np.asarray(Image.open(tar.extractfile(n))) for n in names if n.endswith(".mask.png")])
        assert names[:2] == ["000000.png", "000000.mask.png"] and len(names) == 24
    else:
        masks = np.load(written.path)["y"] if fmt == "npz" else np.load(written.path.with_name("y.npy"))
    assert set(np.unique(masks)) == {0, 1, 2, 3}  # background and every shape class appear
    assert 0.03 < float((masks > 0).mean()) < 0.6  # shapes cover a real share of the pixels, not all
