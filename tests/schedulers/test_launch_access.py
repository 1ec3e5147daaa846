"""submit_run pins the data source for the user before anything is created (settings/access.py is
the one resolver; the CLI's run and the portal's submit/resubmit both go through submit_run)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from core import zoo
from core.errors import SpecError
from schedulers.base import JobRequest, JobStatus, RunState
from schedulers.launch import Executors, submit_run
from schedulers.local import LocalExecutor
from schedulers.registry.runs import RunRegistry
from settings import load_settings


class RecordingLocal(LocalExecutor):
    """The local executor's capacity, but submissions are only recorded (no program starts)."""

    requests: list[JobRequest] = []

    def submit(self, request: JobRequest) -> str:
        self.requests.append(request)
        return "1"

    def statuses(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        return {j: JobStatus(j, RunState.PENDING) for j in job_ids}


class RecordingExecutors(Executors):
    def make(self, scheduler: str, python: str | None = None) -> LocalExecutor:
        return RecordingLocal(self.home / "local", python=python, cpus=4, gpus=0)


def _setup(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    cfg = tmp_path / "ft.toml"
    cfg.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data}"]\n', encoding="utf-8")
    envs = tmp_path / "envs.json"
    envs.write_text(json.dumps({"environments": [{"name": "e", "python": "/usr/bin/python3",
                                                  "frameworks": {"torch": {"version": "2"}}}]}), encoding="utf-8")
    settings = load_settings(cfg, environ={"FLOWTRAIN_ENVIRONMENTS": str(envs)})
    registry = RunRegistry(home=settings.home)
    return settings, registry, RecordingExecutors(settings.home), data


def _spec(source: str):
    spec = zoo.template("mlp")
    return spec.model_copy(update={"data": spec.data.model_copy(update={
        "source": source, "format": "csv", "preprocessing": [], "input_shape": [784], "num_classes": 10})})


def test_submit_pins_the_resolved_source(tmp_path: Path) -> None:
    settings, registry, executors, data = _setup(tmp_path)
    (data / "sub").mkdir()
    (data / "sub" / "t.csv").write_text("a,label\n1,0\n", encoding="utf-8")
    (data / "link.csv").symlink_to(data / "sub" / "t.csv")
    RecordingLocal.requests = []
    run = submit_run(_spec("link.csv"), registry=registry, user="alice", scheduler="local", framework="torch",
                     executors=executors, settings=settings)
    real = str((data / "sub" / "t.csv").resolve())
    assert run.data_source == real and json.loads(registry.get(run.id).spec_json)["data"]["source"] == real
    # The generated program reads the pinned absolute path.
    assert json.loads((run.run_dir / "spec.json").read_text(encoding="utf-8"))["data"]["source"] == real
    assert f'"{real}"' in (run.run_dir / "data.py").read_text(encoding="utf-8")  # a literal (ruff-formatted)
    assert [r.run_dir for r in RecordingLocal.requests] == [run.run_dir]


@pytest.mark.parametrize("source", ["/proc/self/environ", "../escape.csv", "~/x.csv", "/etc/passwd"])
def test_submit_refuses_a_source_outside_the_roots_before_creating_anything(tmp_path: Path, source: str) -> None:
    settings, registry, executors, data = _setup(tmp_path)
    RecordingLocal.requests = []
    with pytest.raises(SpecError) as err:
        submit_run(_spec(source), registry=registry, user="alice", scheduler="local", framework="torch",
                   executors=executors, settings=settings)
    [problem] = err.value.problems
    assert problem.location == "data.source" and str(data.resolve()) in (problem.expected or "")
    assert registry.list_runs() == [] and not any(registry.runs_dir.iterdir()) and RecordingLocal.requests == []
