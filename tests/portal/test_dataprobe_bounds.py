"""The portal's data probe reads headers and a few samples, never a whole dataset: in every format,
what lies past the part it reads is made unreadable (garbage a full parse would fail on) or too
large to read, and the probe still answers, saying what it estimated ("about", "at least")."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from portal import dataprobe
from portal.dataprobe import LABEL_SAMPLE, PROBE_IMAGES, PROBE_MEMBERS, PROBE_ROWS, probe
from tests.data.fixtures import write_images, write_shards


def bytes_read() -> int:
    """What this process has read through read(2) and its kin so far (Linux's /proc/self/io rchar)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar line in /proc/self/io")


def test_csv_reads_the_header_and_the_first_rows_only(tmp_path: Path) -> None:
    """Past the first PROBE_ROWS rows: 20 MB of lines that are neither UTF-8 nor the header's width."""
    path = tmp_path / "big.csv"
    good = "x,label\n" + "".join(f"{i % 97:06d},{i % 3}\n" for i in range(PROBE_ROWS))
    path.write_bytes(good.encode() + b"\xff\xfe;garbage,,,,\n" * ((20 << 20) // 15))
    with pytest.raises(UnicodeDecodeError):
        path.read_text(encoding="utf-8")  # a probe that read on would fail
    probe("big.csv", [tmp_path])  # warm: imports and caches
    before = bytes_read()
    result = probe("big.csv", [tmp_path])
    assert bytes_read() - before < 2 << 20  # the file holds 20 MB more
    assert result.warnings == [] and result.sample_shape == (1,)
    assert result.num_classes == 3 and not result.classes_exact and not result.size_exact
    assert f"at least 3 classes in the first {PROBE_ROWS:,} rows" in result.detail
    assert result.detail.startswith(f"format csv, about {result.size:,} rows (estimated from the first {PROBE_ROWS:,})")


def test_a_long_csv_s_rows_are_estimated_from_its_size(tmp_path: Path) -> None:
    rows = 3 * PROBE_ROWS
    (tmp_path / "long.csv").write_text("x,label\n" + "".join(f"{i:06d},{i % 4}\n" for i in range(rows)))
    result = probe("long.csv", [tmp_path])
    assert not result.size_exact and abs(result.size - rows) <= rows // 100
    assert result.to_spec_fields()["size"] == result.size


def _corrupt_column_chunk(path: Path, row_group: int, column: int) -> None:
    meta = pq.ParquetFile(path).metadata.row_group(row_group).column(column)
    with open(path, "r+b") as f:
        f.seek(meta.data_page_offset)
        f.write(b"\xff" * meta.total_compressed_size)


def test_parquet_reads_the_footer_and_the_first_row_group_only(tmp_path: Path) -> None:
    """Three row groups; the target column of the second and third is overwritten with garbage."""
    labels = [i % 2 for i in range(100)] + [2 + i % 2 for i in range(200)]  # classes 2, 3 only later
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": np.arange(300.0), "label": labels}), path, row_group_size=100,
                   use_dictionary=False, compression="none", write_statistics=False)
    for group in (1, 2):
        _corrupt_column_chunk(path, group, 1)
    with pytest.raises((OSError, pa.ArrowException)):
        pq.read_table(path, columns=["label"])  # a probe that read the whole column would fail
    result = probe("t.parquet", [tmp_path])
    assert (result.size, result.size_exact, result.sample_shape) == (300, True, (1,))
    assert result.num_classes == 2 and not result.classes_exact
    assert result.detail.endswith("at least 2 classes in the first row group (100 rows)")


def test_npz_reads_the_headers_and_the_first_labels_only(tmp_path: Path) -> None:
    """The labels past the first LABEL_SAMPLE are overwritten in the archive: the member's CRC fails."""
    path = tmp_path / "a.npz"
    y = np.arange(2 * LABEL_SAMPLE) % 5
    np.savez(path, x=np.zeros((2 * LABEL_SAMPLE, 2), np.uint8), y=y)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("y.npy")
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", f.read(4))
        end = info.header_offset + 30 + name_length + extra_length + info.compress_size
        f.seek(end - 8 * (LABEL_SAMPLE // 2))
        f.write(b"\x07" * 8 * (LABEL_SAMPLE // 2))
    with pytest.raises(zipfile.BadZipFile, match="CRC"):
        np.load(path)["y"]  # a probe that read every label would fail
    result = probe("a.npz", [tmp_path])
    assert (result.size, result.sample_shape, result.num_classes, result.classes_exact) == (2 * LABEL_SAMPLE, (2,), 5,
                                                                                              False)
    assert f"at least 5 classes in the first {LABEL_SAMPLE:,} labels" in result.detail


def test_npy_is_memory_mapped_whatever_its_size(tmp_path: Path) -> None:
    """A 12 GiB array and 16 GiB of labels (sparse files): reading either whole would not fit."""
    x = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.uint8, (1 << 20, 3, 64, 64))
    y = np.lib.format.open_memmap(tmp_path / "y.npy", "w+", np.int64, (1 << 31,))
    y[:LABEL_SAMPLE] = np.arange(LABEL_SAMPLE) % 7
    del x, y
    result = probe("x.npy", [tmp_path])
    assert (result.size, result.sample_shape, result.num_classes, result.classes_exact) == (1 << 20, (3, 64, 64), 7,
                                                                                              False)
    assert f"at least 7 classes in the first {LABEL_SAMPLE:,} labels" in result.detail


def test_an_image_folder_is_listed_and_only_its_first_images_decoded(tmp_path: Path) -> None:
    """3 class folders of 40 files: past the first PROBE_IMAGES, every file is garbage named .png."""
    paths = sorted(write_images(tmp_path / "imgs", {"a": 40, "b": 40, "c": 40}, size=(7, 5)))  # probe order
    for path in paths[PROBE_IMAGES:]:
        path.write_bytes(b"not an image")
    result = probe("imgs", [tmp_path])
    assert (result.size, result.sample_shape, result.num_classes, result.warnings) == (120, (3, 5, 7), 3, [])
    paths[1].write_bytes(paths[1].read_bytes()[:40])  # among the decoded: training would stop on it
    [warning] = probe("imgs", [tmp_path]).warnings
    assert warning.startswith(f"a/{paths[1].name}: cannot read the image (") and "replace it or delete it" in warning
    for path in paths[:PROBE_IMAGES]:
        path.write_bytes(b"not an image")
    with pytest.raises(dataprobe.ProbeError, match=f"{paths[0].name}: cannot read the image"):
        probe("imgs", [tmp_path])


def test_webdataset_reads_the_first_shard_s_first_members_only(tmp_path: Path) -> None:
    """The first shard holds more members than PROBE_MEMBERS; the two after it are garbage of its size."""
    samples = PROBE_MEMBERS  # two members (KEY.png, KEY.cls) each
    write_shards(tmp_path / "shards", [i % 4 for i in range(samples)], per_shard=samples, size=2)
    first = tmp_path / "shards" / "shard-000000.tar"
    for name in ("shard-000001.tar", "shard-000002.tar"):
        (tmp_path / "shards" / name).write_bytes(b"\xff" * first.stat().st_size)
    result = probe("shards", [tmp_path])
    assert result.format == "webdataset" and result.sample_shape == (3, 2, 2) and not result.size_exact
    assert abs(result.size - 3 * samples) <= 3 * samples // 10
    assert f"about {result.size:,} samples (estimated from the first {PROBE_MEMBERS // 2:,}) in 3 shard(s)" in \
        result.detail
    with pytest.raises(dataprobe.ProbeError, match="cannot read it as webdataset"):
        probe("shards/shard-000001.tar", [tmp_path])  # what a probe reading every shard would have met
