"""Format and size detection at extraction time, confined to the data roots."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from portal.dataprobe import ProbeError, probe, resolve_source
from tests.data.fixtures import tabular_rows, truncate, write_csv, write_images, write_parquet, write_shards


def test_builtin() -> None:
    result = probe("sklearn:digits", [])
    assert (result.format, result.size, result.sample_shape, result.num_classes) == ("builtin", 1797, (1, 8, 8), 10)
    assert "1,797 samples" in result.detail
    with pytest.raises(ProbeError, match="unknown built-in dataset 'sklearn:mnist'"):
        probe("sklearn:mnist", [])


def test_csv(tmp_path: Path) -> None:
    header = ["a", "b", "colour", "name", "label"] + [f"f{i}" for i in range(7)]
    rows = [r + list(range(7)) for r in tabular_rows(1234)]
    write_csv(tmp_path / "t.csv", header, rows)
    result = probe("t.csv", [tmp_path])
    assert result.format == "csv" and result.size == 1234 and result.columns == header
    assert result.sample_shape == (9,) and result.num_classes == 3
    assert result.detail.startswith("format csv, 1,234 rows, 12 columns")
    assert result.to_spec_fields() == {"format": "csv", "size": 1234, "sample_shape": [9]}
    assert result.warnings == []


def test_csv_warns_about_the_rows_training_would_stop_on(tmp_path: Path) -> None:
    rows = [[i, i * 2, i % 2] for i in range(20)]
    rows[6][1] = "abc"
    write_csv(tmp_path / "bad.csv", ["x1", "x2", "label"], rows)
    result = probe("bad.csv", [tmp_path])
    assert result.sample_shape == (2,)  # still a numeric column, as the generated loader sees it
    assert result.warnings == ["column 'x2': 1 value(s) are not numbers, the first in row 7 ('abc')"]


def test_csv_regression_target_has_no_classes(tmp_path: Path) -> None:
    write_csv(tmp_path / "r.csv", ["x", "price"], [[i, i * 1.5] for i in range(10)])
    result = probe("r.csv", [tmp_path], target="price")
    assert result.num_classes is None and result.sample_shape == (1,)


def test_parquet(tmp_path: Path) -> None:
    write_parquet(tmp_path / "d" / "t.parquet", {"a": [1.0, 2.0, 3.0, 4.0], "b": [1, 2, 3, 4],
                                                 "s": ["p", "q", "r", "s"], "label": ["x", "y", "x", "y"]})
    result = probe("d/t.parquet", [tmp_path])
    assert (result.format, result.size, result.sample_shape, result.num_classes) == ("parquet", 4, (2,), 2)
    assert result.detail.startswith("format parquet, 4 rows, 4 columns")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 nope")
    with pytest.raises(ProbeError, match="cannot read it as Parquet"):
        probe("bad.parquet", [tmp_path])


def test_npz_reads_shapes_from_headers(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.zeros((50, 32, 32, 3), np.uint8), y=np.arange(50) % 5)
    result = probe("a.npz", [tmp_path])
    assert (result.format, result.size, result.sample_shape, result.num_classes) == ("npz", 50, (3, 32, 32), 5)
    assert "x 50x32x32x3" in result.detail
    np.savez_compressed(tmp_path / "b.npz", x=np.zeros((7, 8, 8)), target=np.linspace(0, 1, 7))
    result = probe("b.npz", [tmp_path], target="target")
    assert (result.size, result.sample_shape, result.num_classes) == (7, (1, 8, 8), None)
    np.savez(tmp_path / "c.npz", p=np.zeros(3), q=np.zeros(3), r=np.zeros(3))
    with pytest.raises(ProbeError, match="expected arrays 'x' and 'y'"):
        probe("c.npz", [tmp_path])
    np.savez(tmp_path / "d.npz", x=np.zeros((4, 2)), y=np.zeros(4))
    truncate(tmp_path / "d.npz", 0.3)
    with pytest.raises(ProbeError, match="cannot read it as npz"):
        probe("d.npz", [tmp_path])


def test_npy_is_read_through_a_memory_map_and_its_labels_beside_it(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((60, 16, 16, 3), np.uint8))
    np.save(tmp_path / "y.npy", np.arange(60) % 6)
    result = probe("x.npy", [tmp_path])
    assert (result.format, result.size, result.sample_shape, result.num_classes) == ("npy", 60, (3, 16, 16), 6)
    assert "memory-mapped" in result.detail and "labels y.npy" in result.detail
    np.save(tmp_path / "alone.npy", np.zeros((3, 2)))
    (tmp_path / "y.npy").unlink()
    with pytest.raises(ProbeError, match=r"no labels beside it; save them as .*y\.npy"):
        probe("alone.npy", [tmp_path])


def test_webdataset_shards_are_counted_from_their_headers(tmp_path: Path) -> None:
    write_shards(tmp_path / "shards", [i % 3 for i in range(10)], per_shard=4, size=9)
    result = probe("shards", [tmp_path])
    assert (result.format, result.size, result.sample_shape) == ("webdataset", 10, (3, 9, 9))
    assert result.columns == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert "3 shard(s)" in result.detail
    assert probe("shards/shard-000002.tar", [tmp_path]).size == 2


def test_image_folder(tmp_path: Path) -> None:
    write_images(tmp_path / "imgs", {"cat": 3, "dog": 2}, size=(12, 10), mode="L")
    result = probe("imgs", [tmp_path])
    assert (result.format, result.size, result.sample_shape, result.num_classes) == ("image_folder", 5, (1, 10, 12), 2)
    assert result.columns == ["cat", "dog"] and "12x10 L" in result.detail
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProbeError, match="one sub-folder of images per class"):
        probe("empty", [tmp_path])


def test_members_linked_outside_the_roots_are_left_out_with_a_warning(tmp_path: Path) -> None:
    """cat/x.png -> another user's image, and a class folder linked to theirs, were counted (and trained on)."""
    root, other = tmp_path / "root", tmp_path / "other-user"
    write_images(root / "imgs", {"cat": 3, "dog": 2}, size=(12, 10), mode="L")
    theirs = write_images(other / "imgs", {"bird": 4}, size=(12, 10), mode="L")
    os.symlink(theirs[0], root / "imgs" / "cat" / "x.png")
    os.symlink(other / "imgs" / "bird", root / "imgs" / "bird")
    write_images(root / "more", {"cat": 1}, size=(12, 10), mode="L")
    os.symlink(root / "more" / "cat" / "img0.png", root / "imgs" / "dog" / "inside.png")  # stays inside: counted
    result = probe("imgs", [root])
    assert (result.size, result.num_classes, result.columns) == (6, 2, ["cat", "dog"])
    assert result.warnings[0] == (
        f"2 member(s) of the folder are symbolic links that lead outside the data roots and are left out: "
        f"bird -> {other / 'imgs' / 'bird'}, cat/x.png -> {theirs[0]}; a run is refused until they are gone: "
        "remove the links, or copy the files they point at into the folder")
    write_shards(tmp_path / "bob-shards", [0, 1, 2], per_shard=3)
    write_shards(root / "shards", [i % 3 for i in range(4)], per_shard=4)
    os.symlink(tmp_path / "bob-shards" / "shard-000000.tar", root / "shards" / "shard-000009.tar")
    shards = probe("shards", [root])
    assert shards.size == 4 and shards.columns == ["shard-000000.tar"]
    assert shards.warnings[0].startswith("1 member(s) of the folder are symbolic links that lead outside the data "
                                         "roots and are left out: shard-000009.tar -> ")


def test_paths_are_confined_to_the_roots(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write_csv(outside / "secret.csv", ["x", "label"], [[1, 0]])
    write_csv(root / "ok.csv", ["x", "label"], [[1, 0]])
    with pytest.raises(ProbeError, match=r"contains '\.\.'"):
        probe("../outside/secret.csv", [root])
    with pytest.raises(ProbeError, match="lies outside the data roots"):
        probe(str(outside / "secret.csv"), [root])
    os.symlink(outside / "secret.csv", root / "link.csv")
    with pytest.raises(ProbeError, match="is a link that leads outside the data roots"):
        probe("link.csv", [root])
    os.symlink(outside, root / "linkdir")
    with pytest.raises(ProbeError, match="outside the data roots"):
        probe("linkdir/secret.csv", [root])
    os.symlink(root / "ok.csv", root / "inner.csv")  # a link that stays inside is fine
    assert probe("inner.csv", [root]).size == 1
    assert probe(str(root / "ok.csv"), [root]).size == 1
    assert resolve_source("ok.csv", [outside, root]) == (root / "ok.csv").resolve()
    with pytest.raises(ProbeError, match=r"'nope.csv' not found \(looked for .*nope.csv\)"):
        probe("nope.csv", [root])
    with pytest.raises(ProbeError, match="no data roots are configured"):
        probe("ok.csv", [])
    (root / "notes.txt").write_text("hello")
    with pytest.raises(ProbeError, match="cannot tell the format"):
        probe("notes.txt", [root])
