"""The generated data.py's streamed sources: an image folder, a memory-mapped .npy array and
WebDataset tar shards stay on disk, and a streamed batch equals the same rows loaded in memory."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tests.data.fixtures import load_data_module, spec_with_data, write_images, write_shards

pytestmark = pytest.mark.streaming

IMAGE_STEPS = [{"op": "resize", "size": [4, 4]}, {"op": "scale"}, {"op": "normalize"}]


def both(spec_data: dict, tmp_path: Path) -> tuple[dict, dict]:
    """The splits loaded in memory and streamed, from the same data."""
    memory = load_data_module(spec_with_data({**spec_data, "loading": "memory"}), tmp_path / "memory", root=tmp_path)
    stream = load_data_module(spec_with_data({**spec_data, "loading": "stream"}), tmp_path / "stream", root=tmp_path)
    return memory.load_splits(), stream.load_splits()


def test_streamed_image_folder_batches_equal_the_in_memory_ones(tmp_path: Path) -> None:
    write_images(tmp_path / "images", {"a": 12, "b": 9, "c": 7}, size=(6, 5))
    data = {"source": "images", "format": "image_folder", "num_classes": 3, "input_shape": [3, 4, 4],
            "validation_split": 0.25, "preprocessing": IMAGE_STEPS}
    memory, stream = both(data, tmp_path)
    assert set(memory) == set(stream) == {"train", "val"}
    for name in memory:
        split = stream[name]
        assert not isinstance(split.x, np.ndarray) and split.x.shape == memory[name].x.shape
        np.testing.assert_array_equal(split.y, memory[name].y)
        rows = np.arange(len(split))[::-1]
        # statistics come from a sample; with fewer training images than the sample, from all of them
        np.testing.assert_allclose(split.x[rows], memory[name].x[rows], rtol=1e-5, atol=1e-5)


def test_streamed_statistics_come_from_a_bounded_sample(tmp_path: Path) -> None:
    write_images(tmp_path / "images", {"a": 30, "b": 30}, size=(4, 4))
    data = {"source": "images", "format": "image_folder", "num_classes": 2, "input_shape": [3, 4, 4],
            "preprocessing": [{"op": "scale"}, {"op": "normalize"}], "loading": "stream"}
    module = load_data_module(spec_with_data(data), tmp_path / "program", root=tmp_path)
    module.STATISTICS_SAMPLES = 5
    read = []
    original = module.Streamed.read

    def counting(self: object, rows: np.ndarray) -> np.ndarray:
        read.append(len(rows))
        return original(self, rows)

    module.Streamed.read = counting
    module.load_splits()
    assert max(read) == 5 and sum(read) <= 6  # one image for the sample's size, then the sample


def test_npy_is_memory_mapped_and_channels_last_becomes_channels_first(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 4, 4, 3), np.uint8)  # channels last
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", rng.integers(0, 3, 40))
    data = {"source": "x.npy", "num_classes": 3, "input_shape": [3, 4, 4], "validation_split": 0.25,
            "preprocessing": [{"op": "scale"}, {"op": "normalize", "mean": [0.5], "std": [0.25]}]}
    memory, stream = both(data, tmp_path)
    train = stream["train"].x
    assert isinstance(train.array, np.memmap) and Path(train.array.filename) == tmp_path / "x.npy"
    np.testing.assert_allclose(train[np.arange(len(train))], memory["train"].x, atol=1e-6)
    expected = (x[stream["train"].x.rows[0]].transpose(2, 0, 1) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(memory["train"].x[0], expected, atol=1e-5)


def test_npy_without_labels_is_refused_naming_the_file_to_write(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((4, 2), np.float32))
    module = load_data_module(spec_with_data({"source": "x.npy", "num_classes": 2, "input_shape": [2]}),
                              tmp_path / "program", root=tmp_path)
    with pytest.raises(module.DataError, match=r"no labels beside it; save them as .*y\.npy"):
        module.load_splits()


def test_webdataset_shards_stream_and_match_the_in_memory_load(tmp_path: Path) -> None:
    labels = [i % 4 for i in range(30)]
    pixels = write_shards(tmp_path / "shards", labels, per_shard=8)
    data = {"source": "shards", "format": "webdataset", "num_classes": 4, "input_shape": [3, 6, 6],
            "validation_split": 0.2, "preprocessing": [{"op": "scale"}]}
    memory, stream = both(data, tmp_path)
    assert len(stream["train"]) + len(stream["val"]) == 30
    train = stream["train"].x
    assert len(train.shards) == 4 and type(train).__name__ == "TarSamples"
    np.testing.assert_allclose(train[np.arange(len(train))], memory["train"].x)
    first = int(train.rows[0])
    np.testing.assert_allclose(memory["train"].x[0], pixels[first].transpose(2, 0, 1) / 255.0, atol=1e-6)
    assert stream["train"].y[0] == labels[first]


def test_webdataset_sample_without_a_class_is_named(tmp_path: Path) -> None:
    write_shards(tmp_path / "shards", [0, 1, 0], per_shard=3)
    with tarfile.open(tmp_path / "shards" / "shard-000000.tar", "a") as tar:
        info = tarfile.TarInfo("orphan.png")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    data = {"source": "shards", "format": "webdataset", "num_classes": 2, "input_shape": [3, 6, 6]}
    module = load_data_module(spec_with_data(data), tmp_path / "program", root=tmp_path)
    with pytest.raises(module.DataError, match=r"shard-000000\.tar: sample 'orphan' has no \.cls member"):
        module.load_splits()


def test_parquet_streams_by_row_group_and_matches_the_in_memory_load(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    table = pa.table({"a": rng.normal(size=50), "b": rng.integers(0, 9, 50), "name": [f"n{i}" for i in range(50)],
                      "label": [["x", "y", "z"][i % 3] for i in range(50)]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=8)
    data = {"source": "t.parquet", "num_classes": 3, "input_shape": [2], "validation_split": 0.2,
            "preprocessing": [{"op": "standardize"}]}
    memory, stream = both(data, tmp_path)
    train = stream["train"].x
    assert type(train).__name__ == "ParquetRows" and len(train.starts) == 7
    np.testing.assert_array_equal(stream["train"].y, memory["train"].y)
    rows = np.arange(len(train))[::-1]
    # standardize's statistics come from a sample: here the whole (small) training split
    np.testing.assert_allclose(train[rows], memory["train"].x[rows], rtol=1e-4, atol=1e-5)
    assert len(train.groups) <= train.GROUPS_KEPT


def test_parquet_bad_value_is_named_with_its_row_when_its_batch_is_read(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1.0, 2.0, float("nan"), 4.0] * 5, "label": [0, 1] * 10}), tmp_path / "t.parquet",
                   row_group_size=4)
    data = {"source": "t.parquet", "num_classes": 2, "input_shape": [1], "loading": "stream",
            "validation_split": 0.0}
    module = load_data_module(spec_with_data(data), tmp_path / "program", root=tmp_path)
    with pytest.raises(module.DataError, match=r"t\.parquet row 3, column 'a': not a finite number"):
        module.load_splits()["train"].x[np.arange(20)]
