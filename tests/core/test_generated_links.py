"""The generated program reads only what was pinned when the run was submitted: a member of a pinned
folder (an image, a class folder, a shard) that is a symbolic link leading out of the folder is
skipped with a warning, never read; training.init_weights is opened only at its pinned real path, so a
link swapped in after submission is refused (as the data source already was)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from core.spec import PipelineSpec
from tests.data.fixtures import load_data_module, spec_with_data, write_images, write_shards

IMAGES = {"source": "images", "format": "image_folder", "num_classes": 3, "input_shape": [3, 6, 5],
          "validation_split": 0.0, "preprocessing": [{"op": "scale"}]}


@pytest.mark.parametrize("loading", ["memory", "stream"])
def test_image_links_leading_out_of_the_folder_are_skipped_with_a_warning(
        tmp_path: Path, loading: str, capsys: pytest.CaptureFixture[str]) -> None:
    root, other = tmp_path / "root", tmp_path / "other-user"
    write_images(root / "images", {"a": 3, "b": 2}, size=(5, 6))
    theirs = write_images(other, {"c": 4}, size=(5, 6))
    os.symlink(theirs[0], root / "images" / "a" / "x.png")  # another user's image, linked in
    os.symlink(other / "c", root / "images" / "c")  # their whole class folder
    os.symlink(root / "images" / "b" / "img0.png", root / "images" / "a" / "inside.png")  # stays inside: read
    module = load_data_module(spec_with_data({**IMAGES, "loading": loading}), tmp_path / "program", root=root)
    splits = module.load_splits()
    assert len(splits["train"]) == 6 and sorted(set(splits["train"].y.tolist())) == [0, 1]
    warning = capsys.readouterr().err
    folder = (root / "images").resolve()
    assert (f"warning: {folder}: skipping 2 member(s) that are symbolic links leading out of the folder, which "
            "are never read: c, a/x.png") in warning


def test_a_shard_linked_out_of_the_folder_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    write_shards(root / "shards", [i % 2 for i in range(6)], per_shard=6)
    write_shards(tmp_path / "bob", [0, 1, 0, 1], per_shard=4)
    os.symlink(tmp_path / "bob" / "shard-000000.tar", root / "shards" / "shard-000001.tar")
    data = {"source": "shards", "format": "webdataset", "num_classes": 2, "input_shape": [3, 6, 6],
            "validation_split": 0.0, "preprocessing": [{"op": "scale"}], "loading": "stream"}
    splits = load_data_module(spec_with_data(data), tmp_path / "program", root=root).load_splits()
    assert len(splits["train"]) == 6
    assert "skipping 1 member(s) that are symbolic links leading out of the folder, which are never read: " \
           "shard-000001.tar" in capsys.readouterr().err


def _with_weights(path: Path) -> PipelineSpec:
    spec = spec_with_data({"source": "sklearn:iris"})
    return spec.model_copy(update={"training": spec.training.model_copy(update={"init_weights": str(path)})})


def test_init_weights_are_opened_only_at_their_pinned_path(tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    pinned = folder / "w.npz"
    np.savez(pinned, w=np.arange(3, dtype=np.float32))
    module = load_data_module(_with_weights(pinned), tmp_path / "program")
    with module.open_init_weights(str(pinned)) as fh, np.load(fh, allow_pickle=False) as arrays:
        np.testing.assert_array_equal(arrays["w"], [0, 1, 2])
    theirs = tmp_path / "bob.npz"
    np.savez(theirs, w=np.zeros(3, dtype=np.float32))
    pinned.unlink()
    pinned.symlink_to(theirs)  # swapped after submission
    with pytest.raises(module.DataError, match=f"training.init_weights {pinned} is a symbolic link now"):
        module.open_init_weights(str(pinned))
    pinned.unlink()
    (tmp_path / "bob-folder").mkdir()
    np.savez(tmp_path / "bob-folder" / "w.npz", w=np.zeros(3, dtype=np.float32))
    folder.rmdir()
    folder.symlink_to(tmp_path / "bob-folder")  # a folder on the way swapped
    with pytest.raises(module.DataError, match=f"training.init_weights {pinned} now resolves to "
                                               f"{tmp_path / 'bob-folder' / 'w.npz'}: a symbolic link"):
        module.open_init_weights(str(pinned))
