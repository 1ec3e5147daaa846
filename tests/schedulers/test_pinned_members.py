"""Everything a run reads is pinned for its user at submission (schedulers/pinning.py): a folder
source's members that are links leading outside the user's data roots are refused, and every sweep
point is pinned like a run (a point may set training.init_weights)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.errors import SpecError
from core.spec import PipelineSpec
from core.sweep import sweep_from_dict
from schedulers.base import ArraySubmission, JobRequest
from schedulers.launch import submit_run
from schedulers.sweeps import submit_sweep
from tests.schedulers.test_launch_access import RecordingExecutors, RecordingLocal, _setup


class RecordingArrays(RecordingLocal):
    def submit_array(self, requests: Sequence[JobRequest], parallelism: int, script_dir: Path) -> ArraySubmission:
        self.requests.extend(requests)
        return ArraySubmission("7", tuple(str(7 + i) for i in range(len(requests))))


class ArrayExecutors(RecordingExecutors):
    def make(self, scheduler: str, python: str | None = None) -> RecordingArrays:
        return RecordingArrays(self.home / "local", python=python, cpus=4, gpus=0)


def _images(source: str) -> PipelineSpec:
    spec = zoo.template("resnet18_cifar")
    resources = spec.training.resources.model_copy(update={"gpus_per_node": 0, "cpus_per_task": 1})
    return spec.model_copy(update={"data": spec.data.model_copy(update={"source": source, "format": "image_folder"}),
                                   "training": spec.training.model_copy(update={"resources": resources})})


def _folder(data: Path) -> Path:
    folder = data / "pets"
    for name in ("cat", "dog"):
        (folder / name).mkdir(parents=True)
        (folder / name / "a.jpg").write_bytes(b"jpeg")
    return folder


def _submit(spec: PipelineSpec, settings, registry, executors):
    return submit_run(spec, registry=registry, user="alice", scheduler="local", framework="torch",
                      executors=executors, settings=settings)


@pytest.mark.parametrize("member", ["cat/x.jpg", "dog"])
def test_a_member_linked_outside_the_roots_is_refused_before_anything_is_created(tmp_path: Path, member: str) -> None:
    settings, registry, executors, data = _setup(tmp_path)
    folder = _folder(data)
    other = tmp_path / "other-user"
    other.mkdir()
    (other / "img.jpg").write_bytes(b"theirs")
    if member == "dog":
        (folder / "dog" / "a.jpg").unlink()
        (folder / "dog").rmdir()
        (folder / "dog").symlink_to(other)
    else:
        (folder / member).symlink_to(other / "img.jpg")
    real = other if member == "dog" else other / "img.jpg"
    RecordingLocal.requests = []
    with pytest.raises(SpecError) as err:
        _submit(_images("pets"), settings, registry, executors)
    [problem] = err.value.problems
    assert problem.location == "data.source"
    assert problem.message.startswith(f"1 member(s) of the folder are symbolic links that lead outside your data "
                                      f"roots: {member} -> {real}")
    assert registry.list_runs() == [] and RecordingLocal.requests == []


def test_a_member_linked_inside_the_roots_is_read(tmp_path: Path) -> None:
    settings, registry, executors, data = _setup(tmp_path)
    folder = _folder(data)
    (data / "more").mkdir()
    (data / "more" / "b.jpg").write_bytes(b"jpeg")
    (folder / "cat" / "b.jpg").symlink_to(data / "more" / "b.jpg")
    run = _submit(_images("pets"), settings, registry, executors)
    assert run.data_source == str(folder.resolve())


def _weights(path: Path) -> Path:
    np.savez(path, w=np.zeros(2, np.float32))
    return path


def _sweep(values: list[str]):
    return sweep_from_dict({"parameters": {"training.init_weights": values}, "parallelism": 1})


def _sweep_submit(tmp_path: Path, values: list[str]):
    settings, registry, _executors, data = _setup(tmp_path)
    executors = ArrayExecutors(settings.home)
    (data / "t.csv").write_text("a,label\n1,0\n", encoding="utf-8")
    from tests.schedulers.test_launch_access import _spec

    RecordingLocal.requests = []
    return registry, lambda: submit_sweep(_spec("t.csv"), _sweep(values), registry=registry, user="alice",
                                          scheduler="local", framework="torch", executors=executors,
                                          settings=settings), data


def test_a_sweep_point_setting_init_weights_outside_the_roots_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "bob" / "model.npz"
    theirs.parent.mkdir()
    _weights(theirs)
    registry, submit, data = _sweep_submit(tmp_path, [str(_weights(tmp_path / "w.npz")), "/etc/shadow",
                                                      str(theirs)])
    with pytest.raises(SpecError) as err:
        submit()
    problems = err.value.problems
    assert [p.location for p in problems] == ["training.init_weights"] * 3
    assert "(sweep point 0: training.init_weights=" in problems[0].message  # outside too: data/ is not a root
    assert problems[1].message.endswith(f'outside your data roots ({data.resolve()}); put the data under one of them (symbolic '
                                        'links pointing outside are not followed) (sweep point 1: '
                                        'training.init_weights="/etc/shadow")')
    assert problems[2].message.endswith(f'(sweep point 2: training.init_weights="{theirs}")')
    assert registry.list_runs() == [] and RecordingLocal.requests == []


def test_each_sweep_point_reads_its_init_weights_at_the_pinned_real_path(tmp_path: Path) -> None:
    registry, submit, data = _sweep_submit(tmp_path, ["w/a.npz", "b.npz"])
    (data / "w").mkdir()
    _weights(data / "w" / "a.npz")
    _weights(data / "real-b.npz")
    (data / "b.npz").symlink_to(data / "real-b.npz")
    sweep = submit()
    runs = registry.sweep_runs(sweep.id)
    pinned = [json.loads(registry.get(r.id).spec_json)["training"]["init_weights"] for r in runs]
    assert pinned == [str((data / "w" / "a.npz").resolve()), str((data / "real-b.npz").resolve())]
    for run, path in zip(runs, pinned):
        assert f'"{path}"' in (run.run_dir / "train.py").read_text(encoding="utf-8")  # a literal (ruff-formatted)
