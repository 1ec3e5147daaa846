"""The generated data.py reads segmentation data: images with their masks of class indices from an
image folder with a parallel mask folder, .npz, .npy or WebDataset shards (the zoo's example shapes), the images
preprocessed and the masks untouched; a mask that does not fit its image, or names no class, stops the
program with one line naming the file and sample."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core import zoo
from core.example_data import record_path, write_example_data
from core.segmentation_data import mask_problems
from core.spec import PipelineSpec
from tests.data.fixtures import load_data_module


def _unet(**data: object) -> PipelineSpec:
    spec = zoo.template("unet")
    return spec.model_copy(update={"data": spec.data.model_copy(update=data)})


@pytest.mark.parametrize("source, fmt", [("shapes", "image_folder"), ("shapes.npz", "npz"), ("seg/x.npy", "npy"),
                                         ("shards", "webdataset")])
def test_images_and_their_masks_load_in_every_layout(source: str, fmt: str, tmp_path: Path) -> None:
    spec = _unet(source=source, format=fmt, validation_split=0.25)
    written = write_example_data(spec, tmp_path / "root", record=record_path(tmp_path / "home", "a"), samples=8)
    splits = load_data_module(spec, tmp_path / "program", root=tmp_path / "root").load_splits()
    train, val = splits["train"], splits["val"]
    assert (len(train), len(val)) == (6, 2)
    assert train.x.shape == (6, 3, 64, 64) and train.x.dtype == np.float32
    # scaled to [0, 1], then each channel to the training split's zero mean and unit variance
    assert np.allclose(train.x.mean(axis=(0, 2, 3)), 0, atol=1e-4) and np.allclose(train.x.std(axis=(0, 2, 3)), 1, atol=1e-3)
    assert train.y.shape == (6, 64, 64) and train.y.dtype == np.int64 and set(np.unique(train.y)) <= {0, 1, 2, 3}
    if fmt == "image_folder":  # the masks as written, in the images' order
        first = np.asarray(Image.open(written.path / "masks" / "000000.png"))
        assert any(np.array_equal(first, m) for m in (*train.y, *val.y))


def test_a_mask_that_names_no_class_stops_the_program_naming_the_file(tmp_path: Path) -> None:
    spec = _unet(ignore_index=255)
    written = write_example_data(spec, tmp_path / "root", record=record_path(tmp_path / "home", "a"), samples=4)
    mask = written.path / "masks" / "000002.png"
    pixels = np.asarray(Image.open(mask)).copy()
    pixels[0, 0], pixels[0, 1] = 255, 9  # 255 is ignored; 9 is no class of 4
    Image.fromarray(pixels).save(mask)
    data = load_data_module(spec, tmp_path / "program", root=tmp_path / "root")
    with pytest.raises(data.DataError) as err:
        data.load_splits()
    assert str(err.value).startswith(f"{mask}: mask values 9 are no class (0-3 or the ignore index 255)")
    Image.fromarray(pixels[:60]).save(mask)
    with pytest.raises(data.DataError, match=r"the mask is 60x64 but its image is 64x64"):
        data.load_splits()


def test_a_shard_whose_mask_does_not_fit_is_named_before_the_job_and_by_the_program(tmp_path: Path) -> None:
    spec = _unet(source="shards", format="webdataset")
    written = write_example_data(spec, tmp_path / "root", record=record_path(tmp_path / "home", "a"), samples=4)
    shard = written.path / "shard-000000.tar"
    with tarfile.open(shard) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar]
    small = io.BytesIO()
    Image.new("L", (64, 60)).save(small, "PNG")
    with tarfile.open(shard, "w") as tar:
        for name, blob in members:
            blob = small.getvalue() if name == "000002.mask.png" else blob
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    [problem] = mask_problems(spec.data, written.path)
    assert problem.message.startswith(f"{shard}, member 000002.mask.png: the mask's size differs"), problem
    assert problem.received.startswith("60×64") and problem.expected.startswith("64×64")
    data = load_data_module(spec, tmp_path / "program", root=tmp_path / "root")
    with pytest.raises(data.DataError) as err:
        data.load_splits()
    assert str(err.value) == (f"{shard}, member 000002.png (its mask): the mask is 60x64 but its image is 64x64; "
                              "save the mask at its image's size")


@pytest.mark.parametrize("source, fmt", [("shapes", "image_folder"), ("shards", "webdataset")])
def test_a_colour_mask_is_named_before_the_job(source: str, fmt: str, tmp_path: Path) -> None:
    """A mask saved as a colour picture (RGB) holds no class indices: the check names it in either layout."""
    spec = _unet(source=source, format=fmt)
    written = write_example_data(spec, tmp_path / "root", record=record_path(tmp_path / "home", "a"), samples=4)
    colour = io.BytesIO()
    Image.new("RGB", (64, 64), (255, 0, 0)).save(colour, "PNG")
    if fmt == "image_folder":
        (written.path / "masks" / "000001.png").write_bytes(colour.getvalue())
        where, location = written.path / "masks" / "000001.png", "data.mask_folder"
    else:
        shard = written.path / "shard-000000.tar"
        with tarfile.open(shard) as tar:
            members = [(m.name, tar.extractfile(m).read()) for m in tar]
        with tarfile.open(shard, "w") as tar:
            for name, blob in members:
                blob = colour.getvalue() if name == "000001.mask.png" else blob
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
        where, location = f"{shard}, member 000001.mask.png", "data.source"
    [problem] = mask_problems(spec.data, written.path)
    assert (problem.location, problem.message) == (location, f"{where} is not a mask of class indices")
    assert problem.received == "a RGB image" and "single-channel PNG" in problem.expected
