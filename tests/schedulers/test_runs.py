"""The run registry on real SQLite files: users, state history, metrics tailing, artifacts,
reconciliation with a real local executor across a "portal restart", and listing speed."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import pytest

from schedulers.base import Executor, JobAccounting, JobRequest, JobStatus, Resources, RunState, SchedulerError
from schedulers.local import LocalExecutor
from schedulers.reconcile import cancel_run, reconcile
from schedulers.registry.db import RegistryError
from schedulers.registry.files import classify, read_metrics
from schedulers.registry.records import RunNotFound
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until

SPEC = json.dumps({"name": "tiny", "schema_version": 1})


def new_run(reg: RunRegistry, user: str = "alice", **kw: object) -> str:
    run = reg.create_run(user=user, spec_json=SPEC, spec_hash="abc", framework="torch", scheduler="local",
                         name="tiny", **kw)  # type: ignore[arg-type]
    return run.id


@pytest.fixture
def reg(tmp_path: Path) -> RunRegistry:
    return RunRegistry(home=tmp_path / "home")


def test_database_is_wal_and_paths_follow_home(reg: RunRegistry, tmp_path: Path) -> None:
    assert reg.db_path == (tmp_path / "home" / "flowtrain.db").resolve()
    conn = sqlite3.connect(reg.db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run_id = new_run(reg)
    run = reg.get(run_id)
    assert run.run_dir == reg.runs_dir / run_id and run.run_dir.is_dir()
    assert run.state == RunState.PENDING and run.spec_json == SPEC


def test_home_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWTRAIN_HOME", str(tmp_path / "elsewhere"))
    reg = RunRegistry()
    assert reg.db_path == (tmp_path / "elsewhere" / "flowtrain.db").resolve()


def test_users_see_only_their_runs(reg: RunRegistry) -> None:
    a = new_run(reg, "alice")
    b = new_run(reg, "bob")
    assert [r.id for r in reg.list_runs("alice")] == [a]
    assert {r.id for r in reg.list_runs()} == {a, b}
    assert reg.get(a, "alice").user == "alice"
    with pytest.raises(RunNotFound, match="for user bob"):
        reg.get(a, "bob")
    with pytest.raises(RegistryError, match="user name"):
        new_run(reg, "bad user; drop table")


def test_state_history_with_requeue_and_final_exit_code(reg: RunRegistry) -> None:
    run_id = new_run(reg)
    reg.mark_submitted(run_id, "42")
    reg.record_status(run_id, JobStatus("42", RunState.RUNNING, nodes="n1"))
    assert reg.record_status(run_id, JobStatus("42", RunState.RUNNING, nodes="n1")) is None  # no change
    # A requeue seen only through the restart counter still leaves a trace.
    change = reg.record_status(run_id, JobStatus("42", RunState.RUNNING, restarts=1, nodes="n2"))
    assert change is not None and "requeued (restart 1)" in change.detail
    reg.record_status(run_id, JobStatus("42", RunState.FAILED, exit_code=3, reason="NonZeroExitCode", restarts=1),
                      log_tail="Traceback\nValueError: boom")
    run = reg.get(run_id)
    assert (run.state, run.exit_code, run.restarts, run.job_id) == (RunState.FAILED, 3, 1, "42")
    # No times from the executor: the registry records when it saw the job start and end.
    assert run.submitted <= run.started <= run.ended <= time.time() and run.log_tail.endswith("boom")
    states = [(h.state, h.detail) for h in reg.history(run_id)]
    assert [s for s, _ in states] == ["PENDING", "PENDING", "RUNNING", "RUNNING", "FAILED"]
    assert states[1][1] == "submitted as job 42"
    assert "exit code 3" in states[-1][1]
    # The scheduler forgetting the job later does not undo what was recorded.
    assert reg.record_status(run_id, JobStatus("42", RunState.UNKNOWN)) is None
    assert reg.get(run_id).state == RunState.FAILED


def test_metrics_are_tailed_incrementally(reg: RunRegistry) -> None:
    run_id = new_run(reg)
    path = reg.get(run_id).run_dir / "metrics.jsonl"
    assert reg.sync_metrics(run_id) == 0
    with path.open("w") as fh:
        fh.write(json.dumps({"event": "start", "step": 0, "epoch": 0}) + "\n")
        fh.write(json.dumps({"event": "train", "step": 5, "epoch": 0, "loss": 2.0}) + "\n")
        fh.write('{"event": "train", "st')  # the writer is mid-line
    assert reg.sync_metrics(run_id) == 2
    assert reg.sync_metrics(run_id) == 0
    with path.open("a") as fh:
        fh.write('ep": 10, "epoch": 0, "loss": 1.5}\n')
        fh.write("not json\n")
        fh.write(json.dumps({"event": "end", "step": 10, "epoch": 0, "status": "completed"}) + "\n")
    assert reg.sync_metrics(run_id) == 2
    assert [r["step"] for r in reg.metrics(run_id, event="train")] == [5, 10]
    assert reg.metrics(run_id)[-1]["event"] == "end"
    assert reg.get(run_id).metrics_count == 4
    # The file replaced by a shorter one (a fresh run in the same directory): read from the start.
    path.write_text(json.dumps({"event": "start", "step": 0, "epoch": 0}) + "\n")
    assert reg.sync_metrics(run_id) == 1
    assert len(reg.metrics(run_id)) == 1


def test_read_metrics_offsets(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    assert read_metrics(path).records == []
    path.write_text('{"a": 1}\n{"a": 2}\n{"a"')
    chunk = read_metrics(path)
    assert [r["a"] for r in chunk.records] == [1, 2] and chunk.offset == len('{"a": 1}\n{"a": 2}\n')
    assert read_metrics(path, chunk.offset).records == []


def test_artifacts_by_kind(reg: RunRegistry) -> None:
    run_id = new_run(reg)
    root = reg.get(run_id).run_dir
    for rel in ("train.py", "model.py", "data.py", "runtime.py", "spec.json", "manifest.json", "job.sbatch",
                "run.log", "slurm-7.out", "metrics.jsonl", "result.json", "checkpoints/ckpt-10.pt", "model/model.pt",
                "model/model.onnx", "checkpoints/ckpt-20.pt.tmp", "__pycache__/model.cpython-311.pyc", "notes.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    kinds = {a.path: a.kind for a in reg.artifacts(run_id)}
    assert kinds == {
        "train.py": "code", "model.py": "code", "data.py": "code", "runtime.py": "code", "spec.json": "code",
        "manifest.json": "code", "job.sbatch": "code",
        "run.log": "log", "slurm-7.out": "log", "metrics.jsonl": "metrics", "result.json": "metrics",
        "checkpoints/ckpt-10.pt": "checkpoint", "model/model.pt": "model", "model/model.onnx": "model",
        "notes.txt": "other",
    }
    assert classify("log/workerlog.0") == "log"


def test_log_path_and_tail(reg: RunRegistry) -> None:
    run_id = new_run(reg)
    reg.mark_submitted(run_id, "12")
    root = reg.get(run_id).run_dir
    assert reg.log_path(run_id) is None and reg.log_tail(run_id) == ""
    (root / "slurm-12.out").write_text("".join(f"line {i}\n" for i in range(100)))
    assert reg.log_path(run_id) == root / "slurm-12.out"
    assert reg.log_tail(run_id, 3) == "line 97\nline 98\nline 99"


class BrokenExecutor:
    """Every call fails as a Slurm executor does with the controller down."""

    name = "slurm"

    def _down(self, *args: object) -> NoReturn:
        raise SchedulerError("Slurm controller unreachable at SLURM_CONF=/x; start it")

    def submit(self, request: JobRequest) -> str:
        self._down(request)

    def status(self, job_id: str) -> JobStatus:
        self._down(job_id)

    def statuses(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        self._down(job_ids)

    def cancel(self, job_id: str) -> None:
        self._down(job_id)

    def log_path(self, job_id: str) -> Path | None:
        self._down(job_id)

    def accounting(self, job_id: str) -> JobAccounting | None:
        self._down(job_id)


def test_reconcile_reports_unreachable_scheduler_and_keeps_state(reg: RunRegistry) -> None:
    run_id = reg.create_run(user="alice", spec_json=SPEC, spec_hash="h", framework="torch", scheduler="slurm").id
    reg.mark_submitted(run_id, "5")
    broken = BrokenExecutor()
    assert isinstance(broken, Executor)
    report = reconcile(reg, {"slurm": broken})
    assert report.errors and "unreachable" in report.errors[0]
    assert reg.get(run_id).state == RunState.PENDING
    report = reconcile(reg, {})
    assert "not configured" in report.errors[0]


def _local_job(reg: RunRegistry, ex: LocalExecutor, program: str, user: str = "alice") -> str:
    run_id = new_run(reg, user)
    run_dir = reg.get(run_id).run_dir
    (run_dir / "train.py").write_text(program)
    job_id = ex.submit(JobRequest(run_dir=run_dir, name="t", framework="torch", resources=Resources(cpus_per_task=1)))
    reg.mark_submitted(run_id, job_id)
    return run_id


PROGRAM = """\
import json, os, sys, time
with open("metrics.jsonl", "a") as f:
    f.write(json.dumps({"event": "start", "step": 0, "epoch": 0}) + "\\n")
while not os.path.exists("release"):
    time.sleep(0.05)
with open("metrics.jsonl", "a") as f:
    f.write(json.dumps({"event": "end", "step": 3, "epoch": 0, "status": "completed"}) + "\\n")
print("last words", flush=True)
sys.exit(int(os.environ.get("CODE", "0")) if not os.path.exists("fail") else 1)
"""


def test_reconcile_after_portal_restart(tmp_path: Path) -> None:
    """Runs that ended while the "portal" was gone get their final state and exit code from a new
    registry object with a new executor object."""
    home = tmp_path / "home"
    reg = RunRegistry(home=home)
    ex = LocalExecutor(home / "local", cpus=2, gpus=0)
    ok = _local_job(reg, ex, PROGRAM)
    bad = _local_job(reg, ex, PROGRAM)
    reconcile(reg, {"local": ex})
    assert reg.get(ok).state == RunState.RUNNING
    assert [h.state for h in reg.history(ok)] == ["PENDING", "PENDING", "RUNNING"]
    reg.close()
    del reg, ex  # the portal goes away

    (home / "runs" / bad / "fail").touch()
    for run_id in (ok, bad):
        (home / "runs" / run_id / "release").touch()
    ex2 = LocalExecutor(home / "local", cpus=2, gpus=0)
    wait_until(lambda: all(j.run_state.is_final for j in ex2.poll()), message="both jobs to end")

    reg2 = RunRegistry(home=home)
    report = reconcile(reg2, {"local": ex2})
    assert not report.errors and report.checked == 2
    done, failed = reg2.get(ok), reg2.get(bad)
    assert (done.state, done.exit_code) == (RunState.COMPLETED, 0)
    assert (failed.state, failed.exit_code) == (RunState.FAILED, 1)
    assert "last words" in (failed.log_tail or "")
    assert done.ended is not None and done.started is not None and done.ended >= done.started
    job = ex2.status(done.job_id or "")  # the executor's own times, not when the registry looked
    assert (done.started, done.ended) == (job.started, job.ended)
    assert [r["event"] for r in reg2.metrics(ok)] == ["start", "end"]
    assert reconcile(reg2, {"local": ex2}).checked == 0  # nothing active any more


def test_cancel_through_registry_respects_users(reg: RunRegistry, tmp_path: Path) -> None:
    ex = LocalExecutor(reg.home / "local", cpus=2, gpus=0, kill_after_s=2)
    run_id = _local_job(reg, ex, PROGRAM)
    with pytest.raises(RunNotFound):
        cancel_run(reg, run_id, {"local": ex}, user="mallory")
    cancel_run(reg, run_id, {"local": ex}, user="alice")
    wait_until(lambda: reconcile(reg, {"local": ex}) and reg.get(run_id).state == RunState.CANCELLED,
               message=lambda: f"run to be cancelled: {reg.get(run_id)}")
    assert any("cancel requested by alice" in h.detail for h in reg.history(run_id))
    pending = new_run(reg)
    assert cancel_run(reg, pending, {"local": ex}, user="alice").state == RunState.CANCELLED


def test_concurrent_writers(tmp_path: Path) -> None:
    """Threads (each its own connection) and a second registry object write at the same time."""
    home = tmp_path / "home"
    regs = [RunRegistry(home=home), RunRegistry(home=home)]
    errors: list[BaseException] = []

    def work(reg: RunRegistry) -> None:
        try:
            for _ in range(20):
                run_id = new_run(reg)
                reg.mark_submitted(run_id, "1")
                reg.record_status(run_id, JobStatus("1", RunState.RUNNING))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(regs[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert regs[0].count() == 80


@pytest.mark.alone
def test_list_1000_runs_fast(reg: RunRegistry) -> None:
    for i in range(1000):
        run_id = new_run(reg, "alice" if i % 2 else "bob")
        reg.mark_submitted(run_id, str(i))
    t0 = time.perf_counter()
    runs = reg.list_runs()
    elapsed = time.perf_counter() - t0
    assert len(runs) == 1000 and runs[0].created >= runs[-1].created
    assert elapsed < 0.2, f"listing 1,000 runs took {elapsed:.3f} s"
    t0 = time.perf_counter()
    assert len(reg.list_runs("alice")) == 500
    assert time.perf_counter() - t0 < 0.2


def test_a_drawn_run_id_another_run_holds_is_drawn_again(reg: RunRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs created in the same second may draw the same random part (24 bits: 1,000 runs created at once
    collide about one time in thirty); the second is given a fresh id, not refused."""
    import schedulers.registry.runs as runs_module

    draws = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(runs_module.secrets, "token_hex", lambda n: next(draws))
    monkeypatch.setattr(runs_module.time, "strftime", lambda fmt: "20261203-063833")
    first, second = new_run(reg, "alice"), new_run(reg, "alice")
    assert (first, second) == ("20261203-063833-aaaaaa", "20261203-063833-bbbbbb")
    assert reg.get(second).run_dir.name == "20261203-063833-bbbbbb" and reg.get(second).run_dir.is_dir()
