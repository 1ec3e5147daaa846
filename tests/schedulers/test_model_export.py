"""model.onnx for completed runs (no framework here: a real run of each framework is
tests/frameworks/test_onnx_runs.py). When reconcile sees a run complete, the registry records its
export as pending, durably; the export (``export_pending``: the command line after reconciling, the
portal's worker thread) writes ``<run dir>/model.onnx`` and says so in the run's history; when that
fails, the history says why and the run stays COMPLETED — nothing fails for it. A process killed
between the two leaves the export to the next one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import core.trained
from core.trained import Trained
from core.validate import validate
from core.weights import random_canonical
from schedulers.base import JobRequest, JobStatus, RunState
from schedulers.model_export import export_note, export_pending, export_run_onnx
from schedulers.reconcile import follow, reconcile
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until
from tests.op_cases import flatten_linear_spec

REPO = Path(__file__).resolve().parents[2]

SPEC = flatten_linear_spec()


class FinishedExecutor:
    """Every job it is asked about has completed."""

    name = "local"

    def submit(self, request: JobRequest) -> str:
        raise NotImplementedError

    def statuses(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        return {j: JobStatus(j, RunState.COMPLETED, exit_code=0) for j in job_ids}


def submitted_run(reg: RunRegistry) -> str:
    run = reg.create_run(user="alice", spec_json=SPEC.to_json(), spec_hash=SPEC.spec_hash(), framework="torch",
                         scheduler="local", name=SPEC.name)
    reg.mark_submitted(run.id, "7")
    return run.id


@pytest.fixture
def reg(tmp_path: Path) -> RunRegistry:
    return RunRegistry(home=tmp_path / "home")


def test_a_completed_run_without_a_final_model_gets_a_warning_not_a_crash(reg: RunRegistry) -> None:
    run_id = submitted_run(reg)
    report = reconcile(reg, {"local": FinishedExecutor()})
    assert [c.state for c in report.changes] == ["COMPLETED"] and not report.errors
    assert (reg.get(run_id).state, reg.get(run_id).export) == (RunState.COMPLETED, "pending")
    assert len(export_pending(reg)) == 1
    assert reg.get(run_id).export == "failed" and export_pending(reg) == []  # tried once, not again
    last = reg.history(run_id)[-1]
    assert last.state == "COMPLETED"
    assert last.detail.startswith("warning: model.onnx not written: TrainedModelError: ")
    assert "no generated program (no manifest.json)" in last.detail
    assert export_note(reg, run_id) == last.detail
    assert not (reg.get(run_id).run_dir / "model.onnx").exists()


def test_completed_runs_get_model_onnx_from_their_trained_weights(reg: RunRegistry,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The framework's part (reading the final models back) is replaced here; the rest is real. Runs
    that complete together are read in one go (one framework import)."""
    weights = random_canonical(validate(SPEC), seed=9)
    asked: list[tuple[list[Path], str | None]] = []

    def read_trained_many(folders: list[Path], *, python: str | None = None,
                          **kw: object) -> Iterator[tuple[Path, Trained]]:
        asked.append((list(folders), python))
        return iter([(Path(f), Trained("torch", "model/model.pt", weights)) for f in folders])

    monkeypatch.setattr(core.trained, "read_trained_many", read_trained_many)
    first, second = submitted_run(reg), submitted_run(reg)
    follow(reg, {"local": FinishedExecutor()})  # what `run --wait` and `status` do: reconcile, then export
    runs = [reg.get(first), reg.get(second)]
    assert asked == [([r.run_dir for r in runs], runs[0].environment)]
    for run in runs:
        assert reg.history(run.id)[-1].detail == "model.onnx written (ONNX opset 17) from model/model.pt"
        stored = {t.name: numpy_helper.to_array(t)
                  for t in onnx.load(str(run.run_dir / "model.onnx")).graph.initializer}
        np.testing.assert_array_equal(stored["fc/weight"], weights["fc/weight"])
        assert {a.path: a.kind for a in reg.artifacts(run.id)}["model.onnx"] == "model"
    assert [r.export for r in runs] == ["written", "written"]
    assert follow(reg, {"local": FinishedExecutor()}).checked == 0  # once only: they are final now
    assert len(asked) == 1


def test_a_runs_export_can_take_weights_from_a_file(reg: RunRegistry, tmp_path: Path) -> None:
    weights = random_canonical(validate(SPEC), seed=2)
    np.savez(tmp_path / "w.npz", **weights)
    run = reg.get(submitted_run(reg))
    path, source = export_run_onnx(run, tmp_path / "out.onnx", weights=tmp_path / "w.npz")
    assert source == str(tmp_path / "w.npz")
    stored = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    np.testing.assert_array_equal(stored["conv/weight"], weights["conv/weight"])


def test_another_users_run_never_runs_the_interpreter_its_record_names(reg: RunRegistry, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconcile of a shared registry (a portal account, an administrator's ``status --user``)
    exports other users' runs: a recorded interpreter that no configured environment has is refused,
    with the reason in the run's history."""
    marker = tmp_path / "ran"
    evil = tmp_path / "evil-python"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    evil.chmod(0o755)
    monkeypatch.setenv("FLOWTRAIN_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    monkeypatch.delenv("FLOWTRAIN_ENVIRONMENTS", raising=False)
    run = reg.create_run(user="alice", spec_json=SPEC.to_json(), spec_hash=SPEC.spec_hash(), framework="torch",
                         scheduler="local", name=SPEC.name, environment=str(evil))
    reg.mark_submitted(run.id, "7")
    reconcile(reg, {"local": FinishedExecutor()})  # COMPLETED, its export pending
    (run.run_dir / "manifest.json").write_text('{"framework": "torch"}', encoding="utf-8")
    (run.run_dir / "model").mkdir()
    (run.run_dir / "model" / "model.pt").write_bytes(b"")
    [note] = export_pending(reg, [run.id])
    assert not marker.exists()
    assert "UntrustedInterpreter" in note and "not one of the configured environments'" in note
    assert export_note(reg, run.id) == note


KILLED_EXPORTER = """
import sys
from pathlib import Path
import core.trained
from schedulers.reconcile import follow
from schedulers.registry.runs import RunRegistry
from tests.schedulers.test_model_export import FinishedExecutor

def read_trained_many(folders, **kw):  # the framework's subprocess, reading a large model: it never ends here
    Path(sys.argv[2]).write_text("exporting")
    sys.stdin.read()
    raise AssertionError("the test kills this process before it reads on")

core.trained.read_trained_many = read_trained_many
follow(RunRegistry(home=sys.argv[1]), {"local": FinishedExecutor()})
"""


def test_a_process_killed_between_completed_and_the_export_leaves_it_to_the_next(
        reg: RunRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real process records the run COMPLETED and starts its export; it is killed (SIGKILL) in the
    middle. The next pass (another process's: the CLI's `status`, the portal's worker) writes it."""
    run_id = submitted_run(reg)
    marker = tmp_path / "exporting"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_EXPORTER, str(reg.home), str(marker)],
                            cwd=REPO, stdin=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, timeout=60, message="the export to start")
        assert proc.poll() is None, f"the exporting process ended by itself (exit {proc.returncode})"
    finally:
        proc.kill()
        proc.wait()
    run = reg.get(run_id)
    assert (run.state, run.export) == (RunState.COMPLETED, "pending") and not (run.run_dir / "model.onnx").exists()
    weights = random_canonical(validate(SPEC), seed=4)
    monkeypatch.setattr(core.trained, "read_trained_many",
                        lambda folders, **kw: iter([(Path(f), Trained("torch", "model/model.pt", weights))
                                                    for f in folders]))
    assert export_pending(RunRegistry(home=reg.home)) == ["model.onnx written (ONNX opset 17) from model/model.pt"]
    assert reg.get(run_id).export == "written" and (run.run_dir / "model.onnx").is_file()
