"""Nothing blocks the portal: a render of the Runs page (``refresh_states``, what the page and its live
fragment call) records a ResNet-18 run COMPLETED and returns while its ``model.onnx`` is still being
exported by the worker thread — reading the final model back (the framework's part, replaced here by
a read that waits for the test) is never on the render's path."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import core.trained
from core import zoo
from core.trained import Trained
from core.validate import validate
from core.weights import random_canonical
from portal.runs_view import refresh_states
from schedulers.base import JobStatus, RunState
from schedulers.model_export import ExportWorker
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until
from tests.op_cases import flatten_linear_spec


class FinishedExecutor:
    """Every job it is asked about has completed."""

    name = "local"

    def statuses(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        return {j: JobStatus(j, RunState.COMPLETED, exit_code=0) for j in job_ids}


def test_a_render_returns_while_the_completed_runs_export_is_still_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = zoo.template("resnet18")
    weights = random_canonical(validate(spec), seed=1)
    reading, release = threading.Event(), threading.Event()
    readers: list[str] = []

    def read_trained_many(folders: list[Path], **kw: object) -> Iterator[tuple[Path, Trained]]:
        readers.append(threading.current_thread().name)
        reading.set()
        assert release.wait(120), "the test never released the export"
        return iter([(Path(f), Trained("torch", "model/model.pt", weights)) for f in folders])

    monkeypatch.setattr(core.trained, "read_trained_many", read_trained_many)
    registry = RunRegistry(home=tmp_path / "home")
    run = registry.create_run(user="alice", spec_json=spec.to_json(), spec_hash=spec.spec_hash(), framework="torch",
                              scheduler="local", name=spec.name)
    registry.mark_submitted(run.id, "7")
    worker = ExportWorker(registry, interval_s=3600)
    try:
        report = refresh_states(registry, {"local": FinishedExecutor()}, "alice", exporter=worker)
        assert [c.state for c in report.changes] == ["COMPLETED"]
        assert reading.wait(60), "the worker was not woken"  # the export has begun, in the worker's thread …
        after_render = registry.get(run.id)
        assert (after_render.state, after_render.export) == (RunState.COMPLETED, "pending")  # … the render is back
        assert not (run.run_dir / "model.onnx").exists()
        assert readers == ["flowtrain-onnx-export"]
    finally:
        release.set()
    wait_until(lambda: registry.get(run.id).export == "written", timeout=120, message="model.onnx to be written")
    assert (run.run_dir / "model.onnx").stat().st_size > 40_000_000  # ResNet-18's 11.7 M float32 weights
    assert worker.last_error is None


def test_the_first_render_exports_what_a_dead_process_left_pending(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A run recorded COMPLETED by a process that died before its export: the portal's first render
    starts the worker (the page's own, not one the test makes), whose first pass writes it."""
    spec = flatten_linear_spec()
    weights = random_canonical(validate(spec), seed=3)
    monkeypatch.setattr(core.trained, "read_trained_many",
                        lambda folders, **kw: iter([(Path(f), Trained("torch", "model/model.pt", weights))
                                                    for f in folders]))
    registry = RunRegistry(home=tmp_path / "home")
    run = registry.create_run(user="alice", spec_json=spec.to_json(), spec_hash=spec.spec_hash(), framework="torch",
                              scheduler="local", name=spec.name)
    registry.mark_submitted(run.id, "7")
    registry.record_status(run.id, JobStatus("7", RunState.COMPLETED, exit_code=0))
    assert registry.get(run.id).export == "pending"
    report = refresh_states(registry, {}, "alice")  # nothing active to ask: no scheduler needed
    assert report.checked == 0 and not report.errors
    wait_until(lambda: registry.get(run.id).export == "written", timeout=60, message="the leftover export")
    assert (run.run_dir / "model.onnx").is_file()
