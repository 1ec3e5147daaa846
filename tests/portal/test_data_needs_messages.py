"""The data layer's "needs your data" says which it is: nothing there yet, or a place outside the roots
(it said "'/…/data' is not under your data roots (/…)" of a path inside them)."""

from pathlib import Path

from portal.data_needs import data_problem


def test_a_missing_path_inside_a_root_is_said_to_be_missing_not_outside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    missing = data_problem({"source": str(root / "data"), "format": "csv"}, [root])
    assert missing is not None and f"there is nothing at {str(root / 'data')!r} yet" in missing.message
    assert "not under" not in missing.message
    outside = data_problem({"source": str(tmp_path), "format": "csv"}, [root])
    assert outside is not None and f"{str(tmp_path)!r} is not under your data roots ({root})" in outside.message
