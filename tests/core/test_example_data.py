"""Example data is marked as FlowTrain's: writing again replaces only its own files, and anything else
at the source's path is refused with a problem naming it, never overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import zoo
from core.errors import SpecError
from core.example_data import MARKER, write_example_data
from core.spec import PipelineSpec


def _with(name: str, **data: object) -> PipelineSpec:
    spec = zoo.template(name)
    return spec.model_copy(update={"data": spec.data.model_copy(update=data)})


def test_writing_again_replaces_only_the_files_of_the_earlier_example_data(tmp_path: Path) -> None:
    first = write_example_data(zoo.template("resnet18_cifar"), tmp_path, samples=20)
    assert (first.files, first.samples) == (20, 20) and first.size_bytes > 0
    assert first.size_bytes == sum(p.stat().st_size for p in first.path.rglob("*.jpg"))
    added = first.path / "class0" / "mine.png"  # put in by the user since
    added.write_bytes(b"kept")
    again = write_example_data(_with("resnet18_cifar", num_classes=3), tmp_path, samples=6)
    assert again.path == first.path and again.files == 6
    assert sorted(p.name for p in first.path.iterdir()) == [MARKER, "class0", "class1", "class2"]
    assert added.read_bytes() == b"kept" and len(list(first.path.rglob("*.jpg"))) == 6


def test_a_folder_that_is_not_example_data_is_refused_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "cifar10" / "train" / "cat"
    folder.mkdir(parents=True)
    (folder / "tabby.png").write_bytes(b"mine")
    with pytest.raises(SpecError) as err:
        write_example_data(zoo.template("resnet18_cifar"), tmp_path, samples=20)
    [problem] = err.value.problems
    assert problem.location == "data.source"
    assert problem.message.startswith(f"{folder.parent} already exists and is not FlowTrain example data")
    assert [p.name for p in (tmp_path / "cifar10" / "train").rglob("*")] == ["cat", "tabby.png"]


def test_a_file_beside_the_source_that_would_be_overwritten_is_refused(tmp_path: Path) -> None:
    (tmp_path / "arrays").mkdir()
    (tmp_path / "arrays" / "y.npy").write_bytes(b"my labels")  # x.npy is missing, its labels are not
    spec = _with("resnet18_cifar", source="arrays/x.npy", format="npy", input_shape=[4], preprocessing=[])
    with pytest.raises(SpecError, match="y.npy already exists and is not FlowTrain example data"):
        write_example_data(spec, tmp_path, samples=20)
    assert (tmp_path / "arrays" / "y.npy").read_bytes() == b"my labels"
    assert sorted(p.name for p in (tmp_path / "arrays").iterdir()) == ["y.npy"]


def test_a_marker_flowtrain_did_not_write_is_not_trusted(tmp_path: Path) -> None:
    folder = tmp_path / "text"
    folder.mkdir()
    (folder / f".reviews.csv{MARKER}").write_text('{"written_by": "FlowTrain example data", "files": ["../../etc/passwd"]}', encoding="utf-8")
    with pytest.raises(SpecError, match="has a marker FlowTrain cannot read"):
        write_example_data(zoo.template("lstm_text_classifier"), tmp_path, samples=20)
    assert sorted(p.name for p in folder.iterdir()) == [f".reviews.csv{MARKER}"]
