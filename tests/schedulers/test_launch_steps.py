"""One way through for a spec: a real submission from the command line (``flowtrain run``, in this
process) and from the portal (the Runs page's submit) each validate the spec once, plan on the spec as
pinned for the user, and make one executor for the scheduler (that submits and reconciles alike).

The validator is counted where every validation runs (the analyser's ``run``), and the local executor
where every one is made (its constructor); the submissions are real (the job starts, and is cancelled)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import core.validate
import schedulers.launch
from core import zoo
from core.spec import PipelineSpec
from schedulers.launch import Executors
from schedulers.local import LocalExecutor
from schedulers.reconcile import cancel_run
from schedulers.registry.runs import RunRegistry
from settings import load_settings
from settings.access import os_user


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Counts of validations and local executors made, and the specs the selector planned on."""
    counts: dict[str, Any] = {"validations": 0, "executors": 0, "planned": []}
    run, init, select = core.validate._Analyser.run, LocalExecutor.__init__, schedulers.launch.select

    def counting_run(self: Any) -> None:
        counts["validations"] += 1
        run(self)

    def counting_init(self: LocalExecutor, *args: Any, **kwargs: Any) -> None:
        counts["executors"] += 1
        init(self, *args, **kwargs)

    def recording_select(spec: PipelineSpec, *args: Any, **kwargs: Any) -> Any:
        counts["planned"].append(spec.data.source)
        return select(spec, *args, **kwargs)

    monkeypatch.setattr(core.validate._Analyser, "run", counting_run)
    monkeypatch.setattr(LocalExecutor, "__init__", counting_init)
    monkeypatch.setattr(schedulers.launch, "select", recording_select)
    yield counts


@pytest.fixture
def portal_like(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settings file (local scheduler, a data root holding a CSV file) and this venv as the environment."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.csv").write_text("a,b,label\n" + "".join(f"{i},{i % 3},{i % 10}\n" for i in range(40)),
                                encoding="utf-8")
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({"environments": [{"name": "venv", "python": sys.executable,
                                                  "frameworks": {"torch": {"version": "2"}}}]}), encoding="utf-8")
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\nenvironments_file = "{envs}"\n[data]\nroots = ["{data}"]\n'
                      '[selector]\ncalibrate = "never"\n', encoding="utf-8")
    for var in ("FLOWTRAIN_HOME", "FLOWTRAIN_ENVIRONMENTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FLOWTRAIN_CONFIG", str(config))
    return data


def csv_spec() -> PipelineSpec:
    """The mlp template reading a two-feature CSV file by a path relative to the data root."""
    spec = zoo.template("mlp")
    doc = spec.model_dump(mode="json")
    doc["data"].update(source="t.csv", format="csv", target="label", task="classification", num_classes=10,
                       input_shape=[2], preprocessing=[], augmentation=[])
    doc["training"].update(epochs=1, framework="torch")
    return PipelineSpec.model_validate(doc)


def test_the_command_lines_submission_validates_once_and_makes_one_executor(
        counted: dict[str, Any], portal_like: Path, tmp_path: Path) -> None:
    from flowtrain import build_parser

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(csv_spec().to_json(), encoding="utf-8")
    counted["validations"] = 0  # writing the spec above validated it (the pydantic model), not a submission
    args = build_parser().parse_args(["run", str(spec_file), "--scheduler", "local", "--max-steps", "1"])
    assert args.handler(args) == 0
    registry = RunRegistry(home=tmp_path / "home")
    [run] = registry.list_runs(os_user())
    try:
        assert counted["validations"] == 1
        assert counted["executors"] == 1
        assert counted["planned"] == [str((portal_like / "t.csv").resolve())]  # planned as pinned
    finally:
        cancel_run(registry, run.id, Executors(registry.home))


def test_the_portals_submission_validates_once_and_makes_one_executor(
        counted: dict[str, Any], portal_like: Path, tmp_path: Path) -> None:
    from portal.runs_view import _do_submit

    settings = load_settings()
    registry = RunRegistry(home=settings.home)
    executors = Executors(registry.home)
    spec = csv_spec()
    counted["validations"] = 0
    run = _do_submit(spec, settings, "alice", "auto", registry, executors)
    assert run is not None, "the submission failed (the page shows why)"
    try:
        assert counted["validations"] == 1
        assert counted["executors"] == 1
        assert counted["planned"] == [str((portal_like / "t.csv").resolve())]
        assert registry.get(run.id).data_source == str((portal_like / "t.csv").resolve())
    finally:
        cancel_run(registry, run.id, executors)
