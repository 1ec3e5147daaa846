"""What the generated data.py says when a streamed source breaks after it was indexed (a file moved
away, a shard or Parquet file damaged), and how it finds its own DataError inside the exception a
framework's loader re-raises. The end-to-end runs are tests/frameworks/test_streaming_errors.py."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.data.fixtures import load_data_module, spec_with_data, write_images, write_parquet, write_shards

pytestmark = pytest.mark.streaming


def streamed(tmp_path: Path, **data: object) -> ModuleType:
    spec = spec_with_data({"loading": "stream", "num_classes": 2, **data})
    return load_data_module(spec, tmp_path / "program", root=tmp_path)


def test_an_image_moved_away_after_the_folder_was_listed_is_named(tmp_path: Path) -> None:
    paths = write_images(tmp_path / "images", {"a": 3, "b": 3}, size=(4, 4))
    module = streamed(tmp_path, source="images", format="image_folder", input_shape=[3, 4, 4])
    train = module.load_splits()["train"]
    os.remove(paths[4])
    with pytest.raises(module.DataError) as err:
        train.x[np.arange(len(train))]
    assert str(err.value) == (f"{paths[4]}: cannot open the file (No such file or directory); it was moved or "
                              "deleted after the run listed the folder, or the run's user may not read it: put it "
                              "back or make it readable")


def test_a_shard_cut_short_after_it_was_indexed_names_the_member(tmp_path: Path) -> None:
    write_shards(tmp_path / "shards", [i % 2 for i in range(8)], per_shard=8, size=4)
    shard = tmp_path / "shards" / "shard-000000.tar"
    module = streamed(tmp_path, source="shards", format="webdataset", input_shape=[3, 4, 4], validation_split=0.0)
    train = module.load_splits()["train"]
    with tarfile.open(shard) as tar:
        cut = tar.getmember("000007.png").offset_data + 10
    os.truncate(shard, cut)
    with pytest.raises(module.DataError, match=r"shard-000000\.tar, member 000007\.png: the shard ends \d+ bytes "
                                               r"into this member .*; the shard is damaged: write it again"):
        train.x[np.arange(len(train))]


def test_a_damaged_parquet_row_group_is_named(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    write_parquet(tmp_path / "t.parquet", {"a": [float(i) for i in range(40)], "label": [i % 2 for i in range(40)]})
    module = streamed(tmp_path, source="t.parquet", format="parquet", input_shape=[1], validation_split=0.0)
    train = module.load_splits()["train"]
    chunk = pq.ParquetFile(tmp_path / "t.parquet").metadata.row_group(0).column(0)
    with open(tmp_path / "t.parquet", "r+b") as f:
        f.seek(chunk.data_page_offset)
        f.write(b"\xff" * chunk.total_compressed_size)
    train.x.groups.clear()  # as in a loader worker that has not decoded the row group yet
    with pytest.raises(module.DataError, match=r"t\.parquet, row group 0: cannot read it \(.+\); the file is "
                                               r"damaged: write it again"):
        train.x[np.arange(len(train))]


def test_data_error_finds_the_message_inside_a_loader_s_re_raised_exception(tmp_path: Path) -> None:
    module = streamed(tmp_path, source="t.npy", format="npy", input_shape=[2])
    line = "/data/a/1.jpg: cannot read the image (Truncated File Read); replace it or delete it"
    # torch: the worker's exception type, its traceback as the message
    torch_like = module.DataError("Caught DataError in DataLoader worker process 0.\nOriginal Traceback (most "
                                  f"recent call last):\n  File \"data.py\", line 9, in load\ndata.DataError: {line}\n")
    # tf.data: its own error type, the numpy_function's error in the middle of its message
    tf_like = RuntimeError(f"{{{{function_node __wrapped__IteratorGetNext}}}} DataError: {line}\nTraceback (most "
                           "recent call last):\n\n  File \"x.py\", line 1\n\n\t [[{{node PyFuncStateless}}]]")
    for wrapped in (torch_like, tf_like):
        found = module.data_error(wrapped)
        assert isinstance(found, module.DataError) and str(found) == line, wrapped
    raised = module.DataError(line)
    assert module.data_error(raised) is raised
    try:
        try:
            raise raised
        except module.DataError as exc:
            raise ValueError("while reading a batch") from exc
    except ValueError as outer:
        assert module.data_error(outer) is raised
    assert module.data_error(RuntimeError("CUDA error: out of memory")) is None
    assert module.data_error(ValueError("no DataError here: DataErrors are named elsewhere")) is None
