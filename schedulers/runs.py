"""The run registry: every run, its state history, metrics and artifacts, in SQLite (WAL mode).

Default database ``<home>/flowtrain.db``, the home folder being :func:`settings.flowtrain_home`
(``FLOWTRAIN_HOME``, else the settings file's ``home``, else ``./var``); each run has its own
directory ``<home>/runs/<run id>/`` holding the generated program and
everything it writes (``metrics.jsonl``, ``checkpoints/``, ``model/``, ``result.json``, the log).

* ``runs``: one row per run — user, name, the spec (JSON) and its hash, framework, scheduler,
  partition, environment (interpreter), job id, state, exit code/signal, reason, restarts, the
  selector's reasons, timestamps (created/submitted/started/ended), run directory.
  ``accounting``: the ended job's sacct record (elapsed, CPU time, max RSS, exit code, account, QoS).
* ``run_states``: every state change with its time and a detail ("submitted as job 17",
  "requeued (restart 1)", …): a requeue stays visible.
* ``metrics``: the records of ``metrics.jsonl``, read incrementally (the byte offset already read
  is kept in ``runs.metrics_offset``, only whole lines are consumed).

``reconcile(executors)`` asks each non-final run's executor for its job and records what changed:
a job that ended while the portal was down gets its final state and exit code; a failed one gets its
failing rank's error as its reason (:mod:`schedulers.rank_errors`). Runs belong to a
user: ``get``/``list_runs``/``cancel`` take ``user`` and never show or touch another user's run
(``user=None`` is the administrator's view).

Many readers and one writer at a time (WAL); every process/thread opens its own connection.

Private state: the database file is created 0600 (its ``-wal``/``-shm`` files follow its mode) and
each run directory 0700; the home and ``runs/`` folders are created 0700. Every SQLite error
becomes a :class:`RegistryError` naming the database file; a failed write rolls back only a
transaction that is still open, so the real error is the one reported.

Schema versions and migrations: :mod:`schedulers.registry_db`. Files of a run directory are read
without following symbolic links (:mod:`schedulers.run_files`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from core.errors import SpecError
from schedulers.base import FINAL_STATES, Executor, JobStatus, RunState, SchedulerError
from schedulers.model_export import export_completed_runs
from schedulers.rank_errors import Layout, failure_reason
from schedulers.registry_db import (
    FINAL_SQL,
    MIGRATIONS,
    PRIVATE_DIR,
    SCHEMA,
    SCHEMA_VERSION,
    private_file,
    statements,
)
from schedulers.restarts import RESTART_EVENT, attempts, restart_events
from schedulers.run_files import (
    CODE_FILES,
    Artifact,
    MetricsChunk,
    classify,
    list_artifacts,
    open_artifact,
    read_metrics,
    read_result,
    tail_file,
)
from schedulers.run_records import (
    LIST_COLUMNS,
    ReconcileReport,
    RegistryError,
    Run,
    RunNotFound,
    StateChange,
    as_float,
    as_int,
    as_str,
    guarded,
    run_from_row,
    state_detail,
)
from schedulers.sweep_records import Sweep, SweepNotFound, SweepTable
from settings import flowtrain_home

__all__ = [
    "CODE_FILES", "MIGRATIONS", "SCHEMA_VERSION", "Artifact", "MetricsChunk", "ReconcileReport", "RegistryError",
    "Run", "RunNotFound", "RunRegistry", "StateChange", "Sweep", "SweepNotFound", "classify", "read_metrics",
    "tail_file",
]

USER_RE = re.compile(r"[A-Za-z0-9_.@-]{1,64}")  # always fullmatch: "$" would let a trailing newline in
RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
LOG_TAIL_LINES = 30
FAILURE_LOG_LINES = 3000  # the end of a failed job's log where its launchers report the failed rank


# --------------------------------------------------------------------------- the registry


class RunRegistry(SweepTable):
    """The SQLite run registry. Cheap to construct; safe to share between threads. Its sweeps (groups
    of runs, one job array each) come from :class:`~schedulers.sweep_records.SweepTable`."""

    def __init__(self, db_path: str | Path | None = None, *, home: str | Path | None = None) -> None:
        self.home = Path(home).resolve() if home is not None else flowtrain_home()
        self.db_path = Path(db_path).resolve() if db_path is not None else self.home / "flowtrain.db"
        self.runs_dir = self.home / "runs"
        self._local = threading.local()
        for folder in (self.db_path.parent, self.runs_dir):
            try:
                folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            except OSError as exc:
                raise RegistryError(f"cannot create {folder} for the run registry: {exc.strerror}") from exc
        try:
            private_file(self.db_path)
        except OSError as exc:
            raise RegistryError(f"cannot create the run registry {self.db_path}: {exc.strerror}") from exc
        self._migrate()

    @guarded
    def _migrate(self) -> None:
        """Create the schema in a new file, or bring an older file up to :data:`SCHEMA_VERSION`."""
        db = self._conn()
        while True:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return
            if version > SCHEMA_VERSION:
                raise RegistryError(f"{self.db_path} has schema version {version}; this FlowTrain knows "
                                    f"{SCHEMA_VERSION}. Upgrade FlowTrain or use another FLOWTRAIN_HOME")
            if version != 0 and version not in MIGRATIONS:
                raise RegistryError(f"{self.db_path} has schema version {version}, which no migration in "
                                    "schedulers/runs.py upgrades; restore it from a backup or move it away")
            with self._tx() as tx:
                # Another process may have migrated between the check and this (exclusive) transaction.
                if tx.execute("PRAGMA user_version").fetchone()[0] != version:
                    continue
                steps = statements(SCHEMA) if version == 0 else MIGRATIONS[version]
                for statement in steps:
                    tx.execute(statement)
                tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION if version == 0 else version + 1}")

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
        """``BEGIN IMMEDIATE`` … ``COMMIT``; on an error, ``ROLLBACK`` only if SQLite still has the
        transaction open (a full disk may have ended it already), so the first error is the one raised."""

        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
            if exc_type is None:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error as commit_error:
                    self._rollback(commit_error)
                    raise
            else:
                self._rollback(exc)

        def _rollback(self, cause: BaseException | None) -> None:
            if not self.conn.in_transaction:
                return
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                if cause is None:
                    raise
                cause.add_note(f"(the rollback after it failed too: {exc})")

    def _tx(self) -> RunRegistry._Tx:
        return RunRegistry._Tx(self._conn())

    # -- creating and updating --------------------------------------------------------------------

    def new_run_id(self) -> str:
        return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"

    @guarded
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
        data_source: str | None = None,
        sweep_id: str | None = None,
        sweep_point: int | None = None,
    ) -> Run:
        """Insert a run in state PENDING ("created"), then make its directory (0700); returns it.
        ``sweep_id``/``sweep_point``: the sweep (made first, :meth:`create_sweep`) and point it belongs to.

        The row comes first: a write that fails (a full disk) leaves no directory behind, and a
        directory that cannot be made takes its row away again.
        """
        _check_user(user)
        run_id = run_id or self.new_run_id()
        if not RUN_ID_RE.fullmatch(run_id):
            raise RegistryError(f"run id {run_id!r} is invalid; expected letters, digits, '_' and '-'")
        directory = Path(run_dir).resolve() if run_dir is not None else self.runs_dir / run_id
        if data_source is None:
            data_source = _source_of(spec_json)
        now = time.time()
        with self._tx() as db:
            try:
                db.execute(
                    "INSERT INTO runs (id, user, name, spec, spec_hash, framework, scheduler, partition, environment,"
                    " state, created, run_dir, selection, data_source, sweep_id, sweep_point)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, user, name, spec_json, spec_hash, framework, scheduler, partition, environment,
                     RunState.PENDING.value, now, str(directory),
                     json.dumps(selection) if selection is not None else None, data_source, sweep_id, sweep_point),
                )
            except sqlite3.IntegrityError:
                raise RegistryError(f"run id {run_id} exists already") from None
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.PENDING.value, now, f"created ({framework}, {scheduler})"))
        try:
            directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        except OSError as exc:
            with self._tx() as db:
                db.execute("DELETE FROM runs WHERE id=?", (run_id,))
            raise RegistryError(f"cannot create the run directory {directory}: {exc.strerror}") from exc
        return self.get(run_id)

    @guarded
    def mark_submitted(self, run_id: str, job_id: str, detail: str = "") -> None:
        now = time.time()
        with self._tx() as db:
            self._require(db, run_id)
            db.execute("UPDATE runs SET job_id=?, submitted=?, reason='' WHERE id=?", (str(job_id), now, run_id))
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.PENDING.value, now, detail or f"submitted as job {job_id}"))

    @guarded
    def mark_failed(self, run_id: str, reason: str) -> None:
        """A run that never became a job (generation or submission failed)."""
        now = time.time()
        with self._tx() as db:
            self._require(db, run_id)
            db.execute("UPDATE runs SET state=?, reason=?, ended=? WHERE id=?",
                       (RunState.FAILED.value, reason, now, run_id))
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.FAILED.value, now, reason))

    @guarded
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
            detail = state_detail(status, restarted)
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

    @guarded
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

    @guarded
    def get(self, run_id: str, user: str | None = None) -> Run:
        """One run with its spec; ``user`` given: only that user's run (others are "not found")."""
        return run_from_row(self._require(self._conn(), run_id, user), with_spec=True)

    @guarded
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
        sql = f"SELECT {LIST_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params.extend([int(limit), int(offset)])
        return [run_from_row(r) for r in self._conn().execute(sql, params)]

    @guarded
    def active_runs(self, user: str | None = None) -> list[Run]:
        sql = f"SELECT {LIST_COLUMNS} FROM runs WHERE state NOT IN ({FINAL_SQL})"
        params: list[Any] = []
        if user is not None:
            sql += " AND user=?"
            params.append(user)
        return [run_from_row(r) for r in self._conn().execute(sql + " ORDER BY created", params)]

    @guarded
    def history(self, run_id: str) -> list[StateChange]:
        rows = self._conn().execute(
            "SELECT run_id, state, time, detail FROM run_states WHERE run_id=? ORDER BY id", (run_id,))
        return [StateChange(r["run_id"], r["state"], r["time"], r["detail"]) for r in rows]

    @guarded
    def count(self, user: str | None = None) -> int:
        if user is None:
            return int(self._conn().execute("SELECT count(*) FROM runs").fetchone()[0])
        return int(self._conn().execute("SELECT count(*) FROM runs WHERE user=?", (user,)).fetchone()[0])

    # -- metrics ----------------------------------------------------------------------------------

    @guarded
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
                [(run_id, count + i, as_str(r.get("event")), as_int(r.get("step")), as_int(r.get("epoch")), as_float(r.get("time")),
                  json.dumps(r)) for i, r in enumerate(chunk.records)],
            )
            db.execute("UPDATE runs SET metrics_offset=?, metrics_count=? WHERE id=?",
                       (chunk.offset, count + len(chunk.records), run_id))
        return len(chunk.records)

    @guarded
    def metrics(self, run_id: str, *, event: str | None = None, since_seq: int = 0) -> list[dict[str, Any]]:
        """Records stored so far (call :meth:`sync_metrics` first for the newest)."""
        sql = "SELECT record FROM metrics WHERE run_id=? AND seq>=?"
        params: list[Any] = [run_id, since_seq]
        if event is not None:
            sql += " AND event=?"
            params.append(event)
        return [json.loads(r[0]) for r in self._conn().execute(sql + " ORDER BY seq", params)]

    @guarded
    def result(self, run_id: str) -> dict[str, Any] | None:
        """The program's ``result.json`` (final metrics), if written."""
        path = Path(self._require(self._conn(), run_id)["run_dir"]) / "result.json"
        try:
            return read_result(path)
        except (OSError, ValueError) as exc:  # ValueError: bad JSON or UTF-8
            raise RegistryError(f"{path} cannot be read as JSON: {exc}") from exc

    # -- files ------------------------------------------------------------------------------------

    @guarded
    def artifacts(self, run_id: str) -> list[Artifact]:
        """Files of the run directory by kind: code, log, metrics, checkpoint, model, other (symbolic
        links are neither listed nor followed: :func:`schedulers.run_files.list_artifacts`)."""
        root = Path(self._require(self._conn(), run_id)["run_dir"])
        return list_artifacts(root) if root.is_dir() else []

    @guarded
    def open_artifact(self, run_id: str, rel: str) -> BinaryIO:
        """One artifact of the run (``rel`` as :meth:`artifacts` lists it), opened for reading without
        following links; :class:`RegistryError` for anything else."""
        root = Path(self._require(self._conn(), run_id)["run_dir"])
        try:
            return open_artifact(root, rel)
        except (ValueError, OSError) as exc:
            raise RegistryError(f"{rel!r} of run {run_id} cannot be opened: {exc}") from exc

    @guarded
    def log_path(self, run_id: str) -> Path | None:
        """The job's combined stdout/stderr: ``run.log`` (local) or ``slurm-<job>.out`` (Slurm)."""
        row = self._require(self._conn(), run_id)
        root = Path(row["run_dir"])
        candidates = [root / "run.log"]
        if row["job_id"]:
            candidates.insert(0, root / f"slurm-{row['job_id']}.out")
        candidates += sorted(root.glob("slurm-*.out"), key=lambda p: p.lstat().st_mtime, reverse=True)
        return next((c for c in candidates if c.is_file() and not c.is_symlink()), None)

    @guarded
    def log_tail(self, run_id: str, lines: int = LOG_TAIL_LINES) -> str:
        path = self.log_path(run_id)
        return tail_file(path, lines) if path else ""

    # -- with the executors -----------------------------------------------------------------------

    @guarded
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
        if status.state == RunState.FAILED:  # the failing rank's own words, not just "exit code 1"
            log = self.log_path(run.id)
            reason = failure_reason(run.run_dir, tail_file(log, FAILURE_LOG_LINES) if log else "", run.framework,
                                    self._layout(run.id))
            status = dataclasses.replace(status, reason=reason or status.reason)
        if run.scheduler == "slurm":
            self._record_restarts(run, final=status.state in FINAL_STATES)
        return self.record_status(run.id, status, started=started, ended=ended, log_tail=tail)

    def _record_restarts(self, run: Run, final: bool) -> None:
        """Each restart within the allocation that the job log shows, once, as a line of the history
        (:mod:`schedulers.restarts`); they come before the run's final state."""
        log = self.log_path(run.id)
        text = tail_file(log, FAILURE_LOG_LINES) if log else ""
        if not any(a.number > 1 for a in attempts(text)):
            return
        events = restart_events(run.run_dir, text, run.framework, self._layout(run.id), self.restart_count(run.id),
                                final)
        for detail in events:
            self.add_event(run.id, detail)

    def restart_count(self, run_id: str) -> int:
        """How often the run restarted within its allocation so far (its history's restart lines)."""
        return sum(1 for change in self.history(run_id) if RESTART_EVENT.match(change.detail))

    def _layout(self, run_id: str) -> Layout | None:
        """The run's nodes and processes per node, from its spec; ``None`` for a record without a
        readable spec (the failure reason then rests on the job log and the ranks' files alone)."""
        try:
            resources = self.get(run_id).spec().training.resources
        except SpecError:
            return None
        return Layout(resources.nodes, resources.gpus_per_node or 1)

    @guarded
    def fetch_accounting(self, run_id: str, executors: Mapping[str, Executor], user: str | None = None
                         ) -> dict[str, Any] | None:
        """The finished run's accounting record, asked of its executor once and kept; ``None`` until the
        backend has one (never for local runs or without slurmdbd). Raises :class:`SchedulerError`."""
        run = self.get(run_id, user)
        executor = executors.get(run.scheduler)
        if run.accounting is not None or not run.is_final or not run.job_id or executor is None:
            return run.accounting
        record = executor.accounting(run.job_id)
        if record is None:
            return None
        doc = record.to_dict()
        with self._tx() as db:
            db.execute("UPDATE runs SET accounting=? WHERE id=?", (json.dumps(doc), run.id))
        return doc

    @guarded
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


def _check_user(user: str) -> None:
    if not isinstance(user, str) or not USER_RE.fullmatch(user):
        raise RegistryError(f"user name {user!r} is invalid; expected 1-64 letters, digits or '_.@-'")


def _source_of(spec_json: str) -> str | None:
    try:
        source = json.loads(spec_json).get("data", {}).get("source")
    except (ValueError, AttributeError):
        return None
    return source if isinstance(source, str) else None
