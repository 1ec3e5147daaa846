"""The run registry: every run, its state history, metrics and artifacts, in SQLite (WAL mode).

Default database ``<home>/flowtrain.db``, the home folder being :func:`settings.flowtrain_home`
(``FLOWTRAIN_HOME``, else the settings file's ``home``, else ``./var``); each run has its own
directory ``<home>/runs/<run id>/`` holding the generated program and
everything it writes (``metrics.jsonl``, ``checkpoints/``, ``model/``, ``result.json``, the log).

* ``runs``: one row per run — user, name, the spec (JSON) and its hash, framework, scheduler,
  partition, environment (interpreter), job id, state, exit code/signal, reason, restarts, the
  selector's reasons, timestamps (created/submitted/started/ended), run directory.
* ``run_states``: every state change with its time and a detail ("submitted as job 17",
  "requeued (restart 1)", …): a requeue stays visible.
* ``metrics``: the records of ``metrics.jsonl``, read incrementally (the byte offset already read
  is kept in ``runs.metrics_offset``, only whole lines are consumed).

``reconcile(executors)`` asks each non-final run's executor for its job and records what changed:
a job that ended while the portal was down gets its final state and exit code. Runs belong to a
user: ``get``/``list_runs``/``cancel`` take ``user`` and never show or touch another user's run
(``user=None`` is the administrator's view).

Many readers and one writer at a time (WAL); every process/thread opens its own connection.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.errors import FlowTrainError
from schedulers.base import FINAL_STATES, Executor, JobStatus, RunState, SchedulerError
from schedulers.model_export import ONNX_MODEL_FILES, export_completed_runs
from settings import flowtrain_home

SCHEMA_VERSION = 1
USER_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
RUN_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LOG_TAIL_LINES = 30
CODE_FILES = {"train.py", "model.py", "data.py", "spec.json", "manifest.json", "job.sbatch"}
_FINAL_SQL = ", ".join(f"'{s.value}'" for s in FINAL_STATES)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    framework TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    partition TEXT,
    environment TEXT,
    job_id TEXT,
    state TEXT NOT NULL,
    exit_code INTEGER,
    signal INTEGER,
    reason TEXT NOT NULL DEFAULT '',
    restarts INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    submitted REAL,
    started REAL,
    ended REAL,
    run_dir TEXT NOT NULL,
    selection TEXT,
    log_tail TEXT,
    metrics_offset INTEGER NOT NULL DEFAULT 0,
    metrics_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_user_created ON runs(user, created DESC);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created DESC);
CREATE INDEX IF NOT EXISTS runs_active ON runs(state) WHERE state NOT IN ({_FINAL_SQL});
CREATE TABLE IF NOT EXISTS run_states (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    state TEXT NOT NULL,
    time REAL NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS run_states_run ON run_states(run_id, id);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    event TEXT,
    step INTEGER,
    epoch INTEGER,
    time REAL,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""

# Columns of a listing: everything but the (possibly large) spec.
_LIST_COLUMNS = (
    "id, user, name, spec_hash, framework, scheduler, partition, environment, job_id, state, exit_code, "
    "signal, reason, restarts, created, submitted, started, ended, run_dir, selection, log_tail, metrics_count"
)


class RunNotFound(FlowTrainError):
    exit_code = 2


class RegistryError(FlowTrainError):
    pass


@dataclass(frozen=True)
class StateChange:
    run_id: str
    state: str
    time: float
    detail: str = ""


@dataclass(frozen=True)
class Artifact:
    kind: str  # code | log | metrics | checkpoint | model | other
    path: str  # relative to the run directory
    size: int
    mtime: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Run:
    id: str
    user: str
    name: str
    spec_hash: str
    framework: str
    scheduler: str
    partition: str | None
    environment: str | None
    job_id: str | None
    state: RunState
    exit_code: int | None
    signal: int | None
    reason: str
    restarts: int
    created: float
    submitted: float | None
    started: float | None
    ended: float | None
    run_dir: Path
    selection: dict[str, Any] | None = None
    log_tail: str | None = None
    metrics_count: int = 0
    spec_json: str | None = None  # only filled by RunRegistry.get

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def duration(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.time()) - self.started

    def spec(self) -> Any:
        """The spec as a :class:`core.spec.PipelineSpec` (needs a run loaded with ``get``)."""
        from core.load import spec_from_json

        if self.spec_json is None:
            raise RegistryError(f"run {self.id} was loaded without its spec; load it with RunRegistry.get")
        return spec_from_json(self.spec_json, source=f"run {self.id}")

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in asdict(self).items() if k != "spec_json"}
        doc["state"] = self.state.value
        doc["run_dir"] = str(self.run_dir)
        return doc


@dataclass
class ReconcileReport:
    changes: list[StateChange] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line per scheduler that could not be asked
    checked: int = 0


# --------------------------------------------------------------------------- metrics.jsonl


@dataclass(frozen=True)
class MetricsChunk:
    records: list[dict[str, Any]]
    offset: int  # where the next read starts
    reset: bool = False  # the file became shorter than the offset: it was replaced, read from 0
    bad_lines: int = 0


def read_metrics(path: str | Path, offset: int = 0, max_bytes: int = 64 * 1024 * 1024) -> MetricsChunk:
    """The whole lines of ``metrics.jsonl`` after byte ``offset`` (a portal tails the file with this).

    A last line without its newline is left for the next call (the writer is mid-line). A line that
    is not JSON (a write cut short by a killed process) is counted in ``bad_lines`` and skipped.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        return MetricsChunk([], 0, reset=offset > 0)
    reset = size < offset
    if reset:
        offset = 0
    if size == offset:
        return MetricsChunk([], offset, reset)
    with p.open("rb") as fh:
        fh.seek(offset)
        data = fh.read(min(size - offset, max_bytes))
    end = data.rfind(b"\n")
    if end < 0:
        return MetricsChunk([], offset, reset)
    records: list[dict[str, Any]] = []
    bad = 0
    for line in data[: end + 1].splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            bad += 1
            continue
        if isinstance(rec, dict):
            records.append(rec)
        else:
            bad += 1
    return MetricsChunk(records, offset + end + 1, reset, bad)


def classify(rel: str) -> str:
    parts = rel.split("/")
    name = parts[-1]
    if parts[0] == "checkpoints":
        return "checkpoint"
    if parts[0] == "model" or rel in ONNX_MODEL_FILES:
        return "model"
    if name in ("metrics.jsonl", "result.json"):
        return "metrics"
    if name == "run.log" or (name.startswith("slurm-") and name.endswith(".out")) or name.endswith(".log") \
            or parts[0] == "log":
        return "log"
    if len(parts) == 1 and (name in CODE_FILES or name.endswith(".py")):
        return "code"
    return "other"


# --------------------------------------------------------------------------- the registry


class RunRegistry:
    """The SQLite run registry. Cheap to construct; safe to share between threads."""

    def __init__(self, db_path: str | Path | None = None, *, home: str | Path | None = None) -> None:
        self.home = Path(home).resolve() if home is not None else flowtrain_home()
        self.db_path = Path(db_path).resolve() if db_path is not None else self.home / "flowtrain.db"
        self.runs_dir = self.home / "runs"
        self._local = threading.local()
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        db = self._conn()
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RegistryError(f"{self.db_path} has schema version {version}; this FlowTrain knows "
                                f"{SCHEMA_VERSION}. Upgrade FlowTrain or use another FLOWTRAIN_HOME")
        # executescript runs outside a transaction; every statement is idempotent (IF NOT EXISTS).
        db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")

    # -- connections ------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None)
            conn.row_factory = sqlite3.Row
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise RegistryError(f"{self.db_path}: SQLite refused WAL mode (got {mode!r}); "
                                    "put FLOWTRAIN_HOME on a local file system")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    class _Tx:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> RunRegistry._Tx:
        return RunRegistry._Tx(self._conn())

    # -- creating and updating --------------------------------------------------------------------

    def new_run_id(self) -> str:
        return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"

    def create_run(
        self,
        *,
        user: str,
        spec_json: str,
        spec_hash: str,
        framework: str,
        scheduler: str,
        name: str = "pipeline",
        partition: str | None = None,
        environment: str | None = None,
        selection: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        run_dir: str | Path | None = None,
    ) -> Run:
        """Insert a run in state PENDING ("created") and make its directory; returns it."""
        _check_user(user)
        run_id = run_id or self.new_run_id()
        if not RUN_ID_RE.match(run_id):
            raise RegistryError(f"run id {run_id!r} is invalid; expected letters, digits, '_' and '-'")
        directory = Path(run_dir).resolve() if run_dir is not None else self.runs_dir / run_id
        directory.mkdir(parents=True, exist_ok=True)
        now = time.time()
        with self._tx() as db:
            try:
                db.execute(
                    "INSERT INTO runs (id, user, name, spec, spec_hash, framework, scheduler, partition, environment,"
                    " state, created, run_dir, selection) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, user, name, spec_json, spec_hash, framework, scheduler, partition, environment,
                     RunState.PENDING.value, now, str(directory),
                     json.dumps(selection) if selection is not None else None),
                )
            except sqlite3.IntegrityError:
                raise RegistryError(f"run id {run_id} exists already") from None
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.PENDING.value, now, f"created ({framework}, {scheduler})"))
        return self.get(run_id)

    def mark_submitted(self, run_id: str, job_id: str, detail: str = "") -> None:
        now = time.time()
        with self._tx() as db:
            self._require(db, run_id)
            db.execute("UPDATE runs SET job_id=?, submitted=?, reason='' WHERE id=?", (str(job_id), now, run_id))
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.PENDING.value, now, detail or f"submitted as job {job_id}"))

    def mark_failed(self, run_id: str, reason: str) -> None:
        """A run that never became a job (generation or submission failed)."""
        now = time.time()
        with self._tx() as db:
            self._require(db, run_id)
            db.execute("UPDATE runs SET state=?, reason=?, ended=? WHERE id=?",
                       (RunState.FAILED.value, reason, now, run_id))
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.FAILED.value, now, reason))

    def record_status(
        self,
        run_id: str,
        status: JobStatus,
        *,
        started: float | None = None,
        ended: float | None = None,
        log_tail: str | None = None,
    ) -> StateChange | None:
        """Apply what the executor says; returns the state change it recorded (None when nothing
        changed). A new state, or the same state with more restarts (a requeue seen only through
        its counter), each add a history row."""
        now = time.time()
        with self._tx() as db:
            row = self._require(db, run_id)
            old_state, old_restarts = row["state"], row["restarts"]
            new_state = status.state.value
            restarted = status.restarts > old_restarts
            if new_state == old_state and not restarted:
                if status.reason != row["reason"]:
                    db.execute("UPDATE runs SET reason=? WHERE id=?", (status.reason, run_id))
                return None
            if old_state in {s.value for s in FINAL_STATES} and status.state == RunState.UNKNOWN:
                return None  # the scheduler forgot a finished job; the registry keeps what it saw
            detail = _detail(status, restarted)
            sets = {"state": new_state, "reason": status.reason, "restarts": max(status.restarts, old_restarts)}
            if status.state == RunState.RUNNING and row["started"] is None:
                sets["started"] = started or now
            if status.state in FINAL_STATES:
                sets.update(exit_code=status.exit_code, signal=status.signal, ended=ended or now)
                if row["started"] is None and started is not None:
                    sets["started"] = started
                if log_tail is not None:
                    sets["log_tail"] = log_tail
            elif restarted or status.state in (RunState.PENDING, RunState.REQUEUED):
                sets.update(exit_code=None, signal=None, ended=None)
            db.execute(f"UPDATE runs SET {', '.join(f'{k}=?' for k in sets)} WHERE id=?", (*sets.values(), run_id))
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, new_state, now, detail))
        return StateChange(run_id, new_state, now, detail)

    def add_event(self, run_id: str, detail: str) -> None:
        """A history row that keeps the current state (e.g. "cancel requested by alice")."""
        with self._tx() as db:
            row = self._require(db, run_id)
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, row["state"], time.time(), detail))

    # -- reading ----------------------------------------------------------------------------------

    def _require(self, db: sqlite3.Connection, run_id: str, user: str | None = None) -> sqlite3.Row:
        row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None or (user is not None and row["user"] != user):
            who = f" for user {user}" if user is not None else ""
            raise RunNotFound(f"no run {run_id!r}{who}; `python -m flowtrain runs` lists the runs")
        return row

    def get(self, run_id: str, user: str | None = None) -> Run:
        """One run with its spec; ``user`` given: only that user's run (others are "not found")."""
        return _run(self._require(self._conn(), run_id, user), with_spec=True)

    def list_runs(
        self,
        user: str | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        states: Iterable[RunState] | None = None,
    ) -> list[Run]:
        """Newest first, without specs (fast: one indexed query)."""
        where, params = [], []
        if user is not None:
            where.append("user=?")
            params.append(user)
        if states is not None:
            values = [RunState(s).value for s in states]
            where.append(f"state IN ({','.join('?' * len(values))})")
            params.extend(values)
        sql = f"SELECT {_LIST_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params.extend([int(limit), int(offset)])
        return [_run(r) for r in self._conn().execute(sql, params)]

    def active_runs(self, user: str | None = None) -> list[Run]:
        sql = f"SELECT {_LIST_COLUMNS} FROM runs WHERE state NOT IN ({_FINAL_SQL})"
        params: list[Any] = []
        if user is not None:
            sql += " AND user=?"
            params.append(user)
        return [_run(r) for r in self._conn().execute(sql + " ORDER BY created", params)]

    def history(self, run_id: str) -> list[StateChange]:
        rows = self._conn().execute(
            "SELECT run_id, state, time, detail FROM run_states WHERE run_id=? ORDER BY id", (run_id,))
        return [StateChange(r["run_id"], r["state"], r["time"], r["detail"]) for r in rows]

    def count(self, user: str | None = None) -> int:
        if user is None:
            return int(self._conn().execute("SELECT count(*) FROM runs").fetchone()[0])
        return int(self._conn().execute("SELECT count(*) FROM runs WHERE user=?", (user,)).fetchone()[0])

    # -- metrics ----------------------------------------------------------------------------------

    def sync_metrics(self, run_id: str) -> int:
        """Read new whole lines of the run's ``metrics.jsonl`` into the registry; returns how many."""
        row = self._require(self._conn(), run_id)
        chunk = read_metrics(Path(row["run_dir"]) / "metrics.jsonl", row["metrics_offset"])
        if not chunk.records and not chunk.reset and chunk.offset == row["metrics_offset"]:
            return 0
        with self._tx() as db:
            current = db.execute("SELECT metrics_offset, metrics_count FROM runs WHERE id=?", (run_id,)).fetchone()
            if current["metrics_offset"] != row["metrics_offset"]:
                return 0  # another process synced meanwhile; its result stands
            count = current["metrics_count"]
            if chunk.reset:
                db.execute("DELETE FROM metrics WHERE run_id=?", (run_id,))
                count = 0
            db.executemany(
                "INSERT INTO metrics (run_id, seq, event, step, epoch, time, record) VALUES (?,?,?,?,?,?,?)",
                [(run_id, count + i, _s(r.get("event")), _i(r.get("step")), _i(r.get("epoch")), _f(r.get("time")),
                  json.dumps(r)) for i, r in enumerate(chunk.records)],
            )
            db.execute("UPDATE runs SET metrics_offset=?, metrics_count=? WHERE id=?",
                       (chunk.offset, count + len(chunk.records), run_id))
        return len(chunk.records)

    def metrics(self, run_id: str, *, event: str | None = None, since_seq: int = 0) -> list[dict[str, Any]]:
        """Records stored so far (call :meth:`sync_metrics` first for the newest)."""
        sql = "SELECT record FROM metrics WHERE run_id=? AND seq>=?"
        params: list[Any] = [run_id, since_seq]
        if event is not None:
            sql += " AND event=?"
            params.append(event)
        return [json.loads(r[0]) for r in self._conn().execute(sql + " ORDER BY seq", params)]

    def result(self, run_id: str) -> dict[str, Any] | None:
        """The program's ``result.json`` (final metrics), if written."""
        path = Path(self._require(self._conn(), run_id)["run_dir"]) / "result.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:
            raise RegistryError(f"{path} cannot be read as JSON: {exc}") from exc
        return doc if isinstance(doc, dict) else None

    # -- files ------------------------------------------------------------------------------------

    def artifacts(self, run_id: str) -> list[Artifact]:
        """Files of the run directory by kind: code, log, metrics, checkpoint, model, other."""
        root = Path(self._require(self._conn(), run_id)["run_dir"])
        out = []
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if not path.is_file() or path.name.endswith(".tmp") or any(
                        p.startswith(".") or p == "__pycache__" for p in path.relative_to(root).parts):
                    continue
                rel = path.relative_to(root).as_posix()
                st = path.stat()
                out.append(Artifact(classify(rel), rel, st.st_size, st.st_mtime))
        return out

    def log_path(self, run_id: str) -> Path | None:
        """The job's combined stdout/stderr: ``run.log`` (local) or ``slurm-<job>.out`` (Slurm)."""
        row = self._require(self._conn(), run_id)
        root = Path(row["run_dir"])
        candidates = [root / "run.log"]
        if row["job_id"]:
            candidates.insert(0, root / f"slurm-{row['job_id']}.out")
        candidates += sorted(root.glob("slurm-*.out"), key=lambda p: p.stat().st_mtime, reverse=True)
        return next((c for c in candidates if c.is_file()), None)

    def log_tail(self, run_id: str, lines: int = LOG_TAIL_LINES) -> str:
        path = self.log_path(run_id)
        return tail_file(path, lines) if path else ""

    # -- with the executors -----------------------------------------------------------------------

    def reconcile(
        self,
        executors: Mapping[str, Executor],
        *,
        run_ids: Sequence[str] | None = None,
        user: str | None = None,
        metrics: bool = True,
    ) -> ReconcileReport:
        """Ask the executors about every non-final run (or ``run_ids``) and record the changes.

        A scheduler that cannot be asked (Slurm unreachable) is reported in ``errors`` and its runs
        keep their last known state; nothing is guessed.
        """
        report = ReconcileReport()
        runs = self.active_runs(user)
        if run_ids is not None:
            wanted = set(run_ids)
            runs = [r for r in runs if r.id in wanted]
        by_scheduler: dict[str, list[Run]] = {}
        for run in runs:
            if run.job_id:
                by_scheduler.setdefault(run.scheduler, []).append(run)
        for scheduler, group in by_scheduler.items():
            executor = executors.get(scheduler)
            if executor is None:
                report.errors.append(f"{len(group)} run(s) on scheduler {scheduler!r}, which is not configured "
                                     "here; their state is not refreshed")
                continue
            try:
                statuses = dict(executor.statuses([r.job_id for r in group if r.job_id]))
            except SchedulerError as exc:
                report.errors.append(f"{scheduler}: {exc}")
                continue
            for run in group:
                status = statuses.get(run.job_id or "")
                if status is None:
                    continue
                report.checked += 1
                change = self._apply(executor, run, status)
                if change:
                    report.changes.append(change)
        # model.onnx for each run that completed just now; a failure is a warning in its history
        export_completed_runs(self, [c.run_id for c in report.changes if c.state == RunState.COMPLETED.value])
        if metrics:
            for run in runs:
                if run.job_id:
                    self.sync_metrics(run.id)
        return report

    def _apply(self, executor: Executor, run: Run, status: JobStatus) -> StateChange | None:
        started = ended = None
        if run.job_id and (status.state in FINAL_STATES or status.state == RunState.RUNNING):
            started, ended = executor.job_times(run.job_id)
        tail = None
        if status.state in FINAL_STATES and status.state != RunState.COMPLETED:
            tail = self.log_tail(run.id)
        return self.record_status(run.id, status, started=started, ended=ended, log_tail=tail)

    def cancel(self, run_id: str, executors: Mapping[str, Executor], user: str | None = None) -> Run:
        """Cancel a user's run: the executor is asked to stop the job; the state follows by reconcile."""
        run = self.get(run_id, user)
        if run.is_final:
            return run
        who = f" by {user}" if user else ""
        if not run.job_id:
            self.record_status(run.id, JobStatus(job_id="", state=RunState.CANCELLED,
                                                 reason=f"cancelled{who} before submission"))
            return self.get(run_id)
        executor = executors.get(run.scheduler)
        if executor is None:
            raise RegistryError(f"run {run_id} runs on scheduler {run.scheduler!r}, which is not configured here")
        executor.cancel(run.job_id)
        self.add_event(run.id, f"cancel requested{who}")
        self.reconcile(executors, run_ids=[run.id], metrics=False)
        return self.get(run_id)


# --------------------------------------------------------------------------- helpers


def _detail(status: JobStatus, restarted: bool) -> str:
    parts = []
    if restarted:
        parts.append(f"requeued (restart {status.restarts})")
    if status.state in FINAL_STATES:
        if status.signal is not None:
            parts.append(f"signal {status.signal}")
        elif status.exit_code is not None:
            parts.append(f"exit code {status.exit_code}")
    if status.reason:
        parts.append(status.reason)
    if status.nodes and status.state == RunState.RUNNING:
        parts.append(f"on {status.nodes}")
    return "; ".join(parts)


def _run(row: sqlite3.Row, with_spec: bool = False) -> Run:
    keys = row.keys()
    return Run(
        id=row["id"], user=row["user"], name=row["name"], spec_hash=row["spec_hash"], framework=row["framework"],
        scheduler=row["scheduler"], partition=row["partition"], environment=row["environment"],
        job_id=row["job_id"], state=RunState(row["state"]), exit_code=row["exit_code"], signal=row["signal"],
        reason=row["reason"], restarts=row["restarts"], created=row["created"], submitted=row["submitted"],
        started=row["started"], ended=row["ended"], run_dir=Path(row["run_dir"]),
        selection=json.loads(row["selection"]) if row["selection"] else None, log_tail=row["log_tail"],
        metrics_count=row["metrics_count"], spec_json=row["spec"] if with_spec and "spec" in keys else None,
    )


def _check_user(user: str) -> None:
    if not isinstance(user, str) or not USER_RE.match(user):
        raise RegistryError(f"user name {user!r} is invalid; expected 1-64 letters, digits or '_.@-'")


def tail_file(path: Path, lines: int, max_bytes: int = 1 << 20) -> str:
    """The last ``lines`` lines of a text file (reads at most ``max_bytes`` from its end)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - max_bytes, 0))
            data = fh.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:]) if lines > 0 else ""


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _i(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
