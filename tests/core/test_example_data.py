"""Example data is FlowTrain's by its record (under the user's FlowTrain home, with each file's size and
digest), never by anything in the data folder: writing again replaces only its own unchanged files,
anything else at the source's path is refused with a problem naming it, and nothing is written or
deleted through a symbolic link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core import zoo
from core.errors import SpecError
from core.example_data import record_path, write_example_data
from core.spec import PipelineSpec

OLD_MARKER = ".flowtrain-example-data.json"  # what earlier versions trusted inside the data folder


def _with(name: str, **data: object) -> PipelineSpec:
    spec = zoo.template(name)
    return spec.model_copy(update={"data": spec.data.model_copy(update=data)})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    return folder


def _write(spec: PipelineSpec, root: Path, home: Path, samples: int = 20):
    return write_example_data(spec, root, record=record_path(home, "alice"), samples=samples)


def test_writing_again_replaces_only_the_files_of_the_earlier_example_data(root: Path, home: Path) -> None:
    first = _write(zoo.template("resnet18_cifar"), root, home)
    assert (first.files, first.samples) == (20, 20) and first.size_bytes > 0
    assert first.size_bytes == sum(p.stat().st_size for p in first.path.rglob("*.jpg"))
    added = first.path / "class0" / "mine.png"  # put in by the user since
    added.write_bytes(b"kept")
    again = _write(_with("resnet18_cifar", num_classes=3), root, home, samples=6)
    assert again.path == first.path and again.files == 6 and again.kept == ()
    assert sorted(p.name for p in first.path.iterdir()) == ["class0", "class1", "class2"]
    assert added.read_bytes() == b"kept" and len(list(first.path.rglob("*.jpg"))) == 6
    record = json.loads(record_path(home, "alice").read_text(encoding="utf-8"))
    assert sorted(record["written"][str(first.path)]["files"]) == sorted(
        str(p.relative_to(first.path)) for p in first.path.rglob("*.jpg"))


def test_the_record_lies_in_the_users_home_not_in_the_data_folder(root: Path, home: Path) -> None:
    written = _write(zoo.template("lstm_text_classifier"), root, home)
    assert sorted(p.name for p in written.path.parent.iterdir()) == ["reviews.csv"]
    assert record_path(home, "alice") == home / "example-data" / "alice.json"
    assert record_path(home, "alice").is_file()


def test_a_folder_that_is_not_example_data_is_refused_untouched(root: Path, home: Path) -> None:
    folder = root / "cifar10" / "train" / "cat"
    folder.mkdir(parents=True)
    (folder / "tabby.png").write_bytes(b"mine")
    with pytest.raises(SpecError) as err:
        _write(zoo.template("resnet18_cifar"), root, home)
    [problem] = err.value.problems
    assert problem.location == "data.source"
    assert problem.message.startswith(f"{folder.parent} already exists and is not FlowTrain example data")
    assert [p.name for p in (root / "cifar10" / "train").rglob("*")] == ["cat", "tabby.png"]


def test_a_file_beside_the_source_that_would_be_overwritten_is_refused(root: Path, home: Path) -> None:
    (root / "arrays").mkdir()
    (root / "arrays" / "y.npy").write_bytes(b"my labels")  # x.npy is missing, its labels are not
    spec = _with("resnet18_cifar", source="arrays/x.npy", format="npy", input_shape=[4], preprocessing=[])
    with pytest.raises(SpecError, match="y.npy already exists and is not FlowTrain example data"):
        _write(spec, root, home)
    assert (root / "arrays" / "y.npy").read_bytes() == b"my labels"
    assert sorted(p.name for p in (root / "arrays").iterdir()) == ["y.npy"]


def _planted_marker(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OLD_MARKER).write_text(json.dumps({"written_by": "FlowTrain example data", "files": names}),
                                     encoding="utf-8")


@pytest.mark.parametrize("how", ["through a link", "by a relative path"])
def test_a_planted_marker_deletes_nothing(tmp_path: Path, root: Path, home: Path, how: str) -> None:
    """The audit's case: a marker naming the service home's flowtrain.db, through a link planted in the
    folder, made a regenerate delete it."""
    home.mkdir()
    db = home / "flowtrain.db"
    db.write_bytes(b"the registry")
    folder = root / "cifar10" / "train"
    folder.mkdir(parents=True)
    if how == "through a link":
        (folder / "svc").symlink_to(home)
        _planted_marker(folder, ["svc/flowtrain.db"])
    else:
        _planted_marker(folder, [os.path.relpath(db, folder)])
    with pytest.raises(SpecError, match="already exists and is not FlowTrain example data"):
        _write(zoo.template("resnet18_cifar"), root, home)
    assert db.read_bytes() == b"the registry"
    assert OLD_MARKER in [p.name for p in folder.iterdir()]


def test_a_marker_planted_in_flowtrains_own_example_data_deletes_nothing_else(root: Path, home: Path) -> None:
    first = _write(zoo.template("resnet18_cifar"), root, home)
    db = home / "flowtrain.db"
    db.write_bytes(b"the registry")
    _planted_marker(first.path, [os.path.relpath(db, first.path)])
    again = _write(zoo.template("resnet18_cifar"), root, home)
    assert db.read_bytes() == b"the registry"
    assert again.files == 20 and (first.path / OLD_MARKER).is_file()  # the user's file, left alone


def test_a_class_folder_linked_to_another_folder_is_refused_and_nothing_is_written_there(
        tmp_path: Path, root: Path, home: Path) -> None:
    other = tmp_path / "other-user" / "images"
    other.mkdir(parents=True)
    first = _write(zoo.template("resnet18_cifar"), root, home)
    for image in (first.path / "class0").iterdir():
        image.unlink()
    (first.path / "class0").rmdir()
    (first.path / "class0").symlink_to(other)
    before = sorted(p.name for p in first.path.rglob("*.jpg"))
    with pytest.raises(SpecError) as err:
        _write(zoo.template("resnet18_cifar"), root, home)
    assert any(p.message.startswith(f"{first.path / 'class0'} is a symbolic link; FlowTrain never writes or deletes "
                                    "through one") for p in err.value.problems), err.value
    assert list(other.iterdir()) == []
    assert sorted(p.name for p in first.path.rglob("*.jpg")) == before  # nothing deleted either


def test_a_link_in_a_fresh_folder_is_refused_and_nothing_is_written_through_it(
        tmp_path: Path, root: Path, home: Path) -> None:
    other = tmp_path / "other-user"
    other.mkdir()
    (root / "cifar10").mkdir()
    (root / "cifar10" / "train").symlink_to(other)
    with pytest.raises(SpecError, match="train is a symbolic link; FlowTrain never writes or deletes through one"):
        _write(zoo.template("resnet18_cifar"), root, home)
    assert list(other.iterdir()) == []


def test_a_dangling_link_for_the_marker_is_refused_and_nothing_is_created_at_its_target(
        tmp_path: Path, root: Path, home: Path) -> None:
    target = tmp_path / "someone" / "planted.json"
    target.parent.mkdir()
    folder = root / "cifar10" / "train"
    folder.mkdir(parents=True)
    (folder / OLD_MARKER).symlink_to(target)
    with pytest.raises(SpecError, match="already exists and is not FlowTrain example data"):
        _write(zoo.template("resnet18_cifar"), root, home)
    text = root / "text"
    text.mkdir()
    (text / f".reviews.csv{OLD_MARKER}").symlink_to(target)  # beside a file: the old marker's place
    written = _write(zoo.template("lstm_text_classifier"), root, home)
    assert written.files == 1 and not target.exists()


def test_a_data_file_swapped_for_a_link_is_refused(tmp_path: Path, root: Path, home: Path) -> None:
    first = _write(zoo.template("lstm_text_classifier"), root, home)
    theirs = tmp_path / "theirs.csv"
    theirs.write_text("secret", encoding="utf-8")
    first.path.unlink()
    first.path.symlink_to(theirs)
    with pytest.raises(SpecError, match="reviews.csv was written by FlowTrain but now is a symbolic link"):
        _write(zoo.template("lstm_text_classifier"), root, home)
    assert theirs.read_text(encoding="utf-8") == "secret" and first.path.is_symlink()


def test_a_file_changed_since_is_kept_and_named(root: Path, home: Path) -> None:
    first = _write(zoo.template("resnet18_cifar"), root, home)
    edited = first.path / "class5" / "000015.jpg"
    edited.write_bytes(b"my own picture now")
    with pytest.raises(SpecError) as err:
        _write(zoo.template("resnet18_cifar"), root, home)
    [problem] = err.value.problems
    assert problem.message.startswith(f"{edited} was written by FlowTrain but has changed since (its size or "
                                      "digest differs)")
    assert edited.read_bytes() == b"my own picture now" and len(list(first.path.rglob("*.jpg"))) == 20
    # a smaller regenerate does not need its name: it goes ahead, keeps it and names it
    again = _write(zoo.template("resnet18_cifar"), root, home, samples=1)
    assert again.kept == (edited,) and edited.read_bytes() == b"my own picture now"
    assert sorted(str(p.relative_to(first.path)) for p in first.path.rglob("*.jpg")) == [
        "class0/000000.jpg", "class1/000001.jpg", "class2/000002.jpg", "class3/000003.jpg", "class4/000004.jpg",
        "class5/000005.jpg", "class5/000015.jpg", "class6/000006.jpg", "class7/000007.jpg", "class8/000008.jpg", "class9/000009.jpg"]


def test_a_record_flowtrain_cannot_read_is_named_and_nothing_is_deleted(root: Path, home: Path) -> None:
    first = _write(zoo.template("lstm_text_classifier"), root, home)
    record = record_path(home, "alice")
    forged = {"version": 1, "written": {str(first.path): {"files": {"../x": {"size": 1, "sha256": "0" * 64}}}}}
    record.write_text(json.dumps(forged), encoding="utf-8")
    with pytest.raises(SpecError, match=f"the record of the example data FlowTrain wrote for you \\({record}\\)"):
        _write(zoo.template("lstm_text_classifier"), root, home)
    assert first.path.is_file()
