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

The registry records and answers; it asks no scheduler and exports no model. What the executors
say is brought in by :mod:`schedulers.reconcile` (states, failure reasons, accounting, cancelling),
and the ``model.onnx`` of a completed run, recorded here as pending, is written by
:mod:`schedulers.model_export`. Runs belong to a user: ``get``/``list_runs`` take ``user`` and never
show another user's run (``user=None`` is the administrator's view).

Many readers and one writer at a time (WAL); every process/thread opens its own connection.

Private state: the database file is created 0600 (its ``-wal``/``-shm`` files follow its mode) and
each run directory 0700; the home and ``runs/`` folders are created 0700. Every SQLite error
becomes a :class:`RegistryError` naming the database file; a failed write rolls back only a
transaction that is still open, so the real error is the one reported.

Schema versions and migrations: :mod:`schedulers.registry.db`. Files of a run directory are read
without following symbolic links (:mod:`schedulers.registry.files`).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from schedulers.base import FINAL_STATES, JobStatus, RunState
from schedulers.registry.db import FINAL_SQL, PRIVATE_DIR, Database, RegistryError, Transaction, guarded, private_file
from schedulers.registry.files import (
    Artifact,
    list_artifacts,
    open_artifact,
    open_log,
    read_metrics,
    read_result,
    tail_file,
)
from schedulers.registry.records import (
    LIST_COLUMNS,
    Run,
    RunNotFound,
    StateChange,
    as_float,
    as_int,
    as_str,
    run_from_row,
    state_detail,
)
from schedulers.registry.sweeps import SweepTable
from settings import flowtrain_home

USER_RE = re.compile(r"[A-Za-z0-9_.@-]{1,64}")  # always fullmatch: "$" would let a trailing newline in
RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
LOG_TAIL_LINES = 30


# --------------------------------------------------------------------------- the registry


ID_DRAWS = 20  # a generated id (second + 24 random bits) drawn again while another run holds it

class RunRegistry(SweepTable):
    """The SQLite run registry. Cheap to construct; safe to share between threads. Its sweeps (groups
    of runs, one job array each) come from :class:`~schedulers.registry.sweeps.SweepTable`."""

    def __init__(self, db_path: str | Path | None = None, *, home: str | Path | None = None) -> None:
        self.home = Path(home).resolve() if home is not None else flowtrain_home()
        self.db_path = Path(db_path).resolve() if db_path is not None else self.home / "flowtrain.db"
        self.runs_dir = self.home / "runs"
        self.db = Database(self.db_path)
        for folder in (self.db_path.parent, self.runs_dir):
            try:
                folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            except OSError as exc:
                raise RegistryError(f"cannot create {folder} for the run registry: {exc.strerror}") from exc
        try:
            private_file(self.db_path)
        except OSError as exc:
            raise RegistryError(f"cannot create the run registry {self.db_path}: {exc.strerror}") from exc
        self.db.migrate()

    # -- connections ------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        return self.db.conn()

    def _tx(self) -> Transaction:
        return self.db.tx()

    def close(self) -> None:
        self.db.close()

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
        generated = not run_id  # a drawn id that another run drew in the same second is drawn again
        run_id = run_id or self.new_run_id()
        if not RUN_ID_RE.fullmatch(run_id):
            raise RegistryError(f"run id {run_id!r} is invalid; expected letters, digits, '_' and '-'")
        if data_source is None:
            data_source = _source_of(spec_json)
        now = time.time()
        for _ in range(ID_DRAWS):
            directory = Path(run_dir).resolve() if run_dir is not None else self.runs_dir / run_id
            try:
                self._insert_run(run_id, user, name, spec_json, spec_hash, framework, scheduler, partition,
                                 environment, now, directory, selection, data_source, sweep_id, sweep_point)
                break
            except sqlite3.IntegrityError:
                if not generated:
                    raise RegistryError(f"run id {run_id} exists already") from None
                run_id = self.new_run_id()
        else:
            raise RegistryError(f"no free run id after {ID_DRAWS} draws (last {run_id})")
        try:
            directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        except OSError as exc:
            with self._tx() as db:
                db.execute("DELETE FROM runs WHERE id=?", (run_id,))
            raise RegistryError(f"cannot create the run directory {directory}: {exc.strerror}") from exc
        return self.get(run_id)

    def _insert_run(self, run_id: str, user: str, name: str, spec_json: str, spec_hash: str, framework: str,
                    scheduler: str, partition: str | None, environment: str | None, now: float, directory: Path,
                    selection: Mapping[str, Any] | None, data_source: str | None, sweep_id: str | None,
                    sweep_point: int | None) -> None:
        """The run's row and its first state, in one transaction (sqlite3.IntegrityError: the id is taken)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, user, name, spec, spec_hash, framework, scheduler, partition, environment,"
                " state, created, run_dir, selection, data_source, sweep_id, sweep_point)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, user, name, spec_json, spec_hash, framework, scheduler, partition, environment,
                 RunState.PENDING.value, now, str(directory),
                 json.dumps(selection) if selection is not None else None, data_source, sweep_id, sweep_point),
            )
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, RunState.PENDING.value, now, f"created ({framework}, {scheduler})"))

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
        log_tail: str | None = None,
    ) -> StateChange | None:
        """Apply what the executor says; returns the state change it recorded (None when nothing
        changed). A new state, or the same state with more restarts (a requeue seen only through
        its counter), each add a history row. The start and end are the backend's where it has them
        (``status.started``/``ended``), else now. COMPLETED also records the run's ``model.onnx`` as
        pending (:mod:`schedulers.model_export` writes it, off the path of whoever reconciled)."""
        started, ended = status.started, status.ended
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
                if status.state == RunState.COMPLETED:
                    sets["export"] = sets["tracking"] = "pending"
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
        links are neither listed nor followed: :func:`schedulers.registry.files.list_artifacts`)."""
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
    def open_log(self, run_id: str) -> tuple[str, BinaryIO] | None:
        """The job's log (the names :meth:`log_path` tries, in its order) opened once, never through a
        link (:func:`schedulers.registry.files.open_log`); ``None`` when there is none yet,
        :class:`RegistryError` naming a link (or anything but a regular file) in its place."""
        row = self._require(self._conn(), run_id)
        root = Path(row["run_dir"])
        names = ([f"slurm-{row['job_id']}.out"] if row["job_id"] else []) + ["run.log"]
        found: list[tuple[float, str]] = []
        try:
            with os.scandir(root) as entries:
                for e in entries:
                    if e.name.startswith("slurm-") and e.name.endswith(".out") and e.name not in names:
                        try:
                            found.append((e.stat(follow_symlinks=False).st_mtime, e.name))
                        except FileNotFoundError:
                            continue  # removed while listing
        except (FileNotFoundError, NotADirectoryError):
            pass  # no run directory (yet): open_log says so
        names += [name for _mtime, name in sorted(found, reverse=True)]
        try:
            return open_log(root, names)
        except (ValueError, OSError) as exc:
            raise RegistryError(f"the log of run {run_id} cannot be read: {exc}") from exc

    @guarded
    def log_tail(self, run_id: str, lines: int = LOG_TAIL_LINES) -> str:
        path = self.log_path(run_id)
        return tail_file(path, lines) if path else ""

    # -- what the orchestrator learnt --------------------------------------------------------------

    @guarded
    def record_accounting(self, run_id: str, record: Mapping[str, Any]) -> None:
        """Keep the finished job's accounting record (sacct's figures, asked once)."""
        with self._tx() as db:
            self._require(db, run_id)
            db.execute("UPDATE runs SET accounting=? WHERE id=?", (json.dumps(dict(record)), run_id))

    @guarded
    def pending_exports(self, run_ids: Sequence[str] | None = None, user: str | None = None) -> list[Run]:
        """Completed runs (of ``run_ids``, of ``user``, or all) whose ``model.onnx`` is still to be
        written, oldest first, with their specs.

        "Pending" is recorded in the same transaction as COMPLETED, so a process that dies after it
        leaves the export to the next one that asks."""
        return self._pending("export", run_ids, user)

    @guarded
    def record_export(self, run_id: str, written: bool, detail: str) -> None:
        """The export's outcome: ``written`` or ``failed``, and a line in the run's history saying which.
        The first outcome stands (two processes may export the same run at once; both write the same
        file, atomically)."""
        self._record_outcome("export", run_id, "written" if written else "failed", detail)

    @guarded
    def pending_tracking(self, run_ids: Sequence[str] | None = None, user: str | None = None) -> list[Run]:
        """Completed runs (of ``run_ids``, of ``user``, or all) still to be logged to MLflow, oldest
        first, with their specs; recorded pending with COMPLETED, as the export
        (:mod:`schedulers.tracking`)."""
        return self._pending("tracking", run_ids, user)

    @guarded
    def record_tracking(self, run_id: str, logged: bool, detail: str) -> None:
        """MLflow logging's outcome: ``logged`` or ``failed``, and a line in the run's history saying
        which. The first outcome stands."""
        self._record_outcome("tracking", run_id, "logged" if logged else "failed", detail)

    def _pending(self, column: str, run_ids: Sequence[str] | None, user: str | None) -> list[Run]:
        """Completed runs whose after-completion step ``column`` (export, tracking) is still pending."""
        rows = self._conn().execute(
            f"SELECT * FROM runs WHERE {_AFTER_COMPLETION[column]}='pending' ORDER BY created, id").fetchall()
        wanted = None if run_ids is None else set(run_ids)
        return [run_from_row(r, with_spec=True) for r in rows
                if (wanted is None or r["id"] in wanted) and (user is None or r["user"] == user)]

    def _record_outcome(self, column: str, run_id: str, outcome: str, detail: str) -> None:
        """Set a pending after-completion step's outcome and say it in the run's history; the first
        outcome stands."""
        column = _AFTER_COMPLETION[column]
        with self._tx() as db:
            row = self._require(db, run_id)
            if row[column] != "pending":
                return
            db.execute(f"UPDATE runs SET {column}=? WHERE id=?", (outcome, run_id))
            db.execute("INSERT INTO run_states (run_id, state, time, detail) VALUES (?,?,?,?)",
                       (run_id, row["state"], time.time(), detail[:2000]))


# --------------------------------------------------------------------------- helpers

# the columns of the steps done after a run completed, each recorded 'pending' with COMPLETED (only these
# names are ever put into SQL text)
_AFTER_COMPLETION = {"export": "export", "tracking": "tracking"}


def _check_user(user: str) -> None:
    if not isinstance(user, str) or not USER_RE.fullmatch(user):
        raise RegistryError(f"user name {user!r} is invalid; expected 1-64 letters, digits or '_.@-'")


def _source_of(spec_json: str) -> str | None:
    try:
        source = json.loads(spec_json).get("data", {}).get("source")
    except (ValueError, AttributeError):
        return None
    return source if isinstance(source, str) else None
