"""The run registry's SQLite file: its schema, the migrations between schema versions, the
connections and write transactions (:class:`Database`), the file's private mode, and SQLite's errors
in words (:class:`RegistryError`, :func:`guarded`), used by :mod:`schedulers.registry.runs` and
:mod:`schedulers.registry.sweeps`.

Schema versions: ``PRAGMA user_version`` holds the version of the file's schema. A new file gets
:data:`SCHEMA` at :data:`SCHEMA_VERSION`; an older file is brought up to date when it is opened, one
step at a time, by :data:`MIGRATIONS` (``MIGRATIONS[n]`` turns version ``n`` into ``n + 1``), each
step in one transaction. A file newer than this code is refused. To change the schema: change
``SCHEMA``, add ``MIGRATIONS[SCHEMA_VERSION]`` doing the same to an existing file, bump
``SCHEMA_VERSION``, and extend ``test_registry_upgrades_an_old_file`` in
``tests/schedulers/test_registry_safety.py`` (it builds a file of every older version).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from core.errors import FlowTrainError
from schedulers.base import FINAL_STATES

SCHEMA_VERSION = 7
FINAL_SQL = ", ".join(f"'{s.value}'" for s in FINAL_STATES)
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

# A sweep (schedulers/sweeps.py): one spec, its sweep document, and one job array whose tasks are runs
# (runs.sweep_id, runs.sweep_point = the array task id).
SWEEPS_TABLE = """CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    sweep TEXT NOT NULL,
    points TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    framework TEXT NOT NULL,
    job_id TEXT,
    parallelism INTEGER NOT NULL,
    metric TEXT NOT NULL,
    goal TEXT NOT NULL,
    created REAL NOT NULL,
    sweep_dir TEXT NOT NULL
)"""

# A completed run's predicted and actual time to result (schedulers/learning.py), one row per run: what the
# selector said at submission (its parts as JSON) beside what the run took (submission to its end, and the
# program's own timings), for `flowtrain speeds --accuracy`.
ESTIMATES_TABLE = """CREATE TABLE IF NOT EXISTS estimates (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    user TEXT NOT NULL,
    framework TEXT NOT NULL,
    partition TEXT NOT NULL,
    source TEXT NOT NULL,
    predicted_s REAL NOT NULL,
    low_s REAL,
    high_s REAL,
    actual_s REAL NOT NULL,
    predicted TEXT NOT NULL,
    actual TEXT NOT NULL,
    recorded REAL NOT NULL
)"""

SCHEMA = f"""
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
    metrics_count INTEGER NOT NULL DEFAULT 0,
    data_source TEXT,
    accounting TEXT,
    sweep_id TEXT REFERENCES sweeps(id),
    sweep_point INTEGER,
    export TEXT,
    tracking TEXT
);
CREATE INDEX IF NOT EXISTS runs_user_created ON runs(user, created DESC);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created DESC);
CREATE INDEX IF NOT EXISTS runs_active ON runs(state) WHERE state NOT IN ({FINAL_SQL});
{SWEEPS_TABLE};
CREATE INDEX IF NOT EXISTS runs_sweep ON runs(sweep_id, sweep_point) WHERE sweep_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_export_pending ON runs(created) WHERE export = 'pending';
{ESTIMATES_TABLE};
CREATE INDEX IF NOT EXISTS estimates_user ON estimates(user, framework, partition);
CREATE INDEX IF NOT EXISTS runs_tracking_pending ON runs(created) WHERE tracking = 'pending';
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


# MIGRATIONS[n]: the statements that turn a version-n file into version n + 1.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 2: the data source the run was allowed to read (pinned at submission), for audits and listings.
    1: ("ALTER TABLE runs ADD COLUMN data_source TEXT",
        "UPDATE runs SET data_source = json_extract(spec, '$.data.source') WHERE json_valid(spec)"),
    2: ("ALTER TABLE runs ADD COLUMN accounting TEXT",),  # sacct's figures of a finished Slurm job
    # 4: sweeps, each one job array; its points are runs grouped by sweep_id
    3: (SWEEPS_TABLE,
        "ALTER TABLE runs ADD COLUMN sweep_id TEXT REFERENCES sweeps(id)",
        "ALTER TABLE runs ADD COLUMN sweep_point INTEGER",
        "CREATE INDEX IF NOT EXISTS runs_sweep ON runs(sweep_id, sweep_point) WHERE sweep_id IS NOT NULL"),
    # 5: model.onnx of a completed run: 'pending' (recorded with COMPLETED, durable), then 'written' or
    # 'failed'. Runs completed before have had their export tried already; they stay NULL.
    4: ("ALTER TABLE runs ADD COLUMN export TEXT",
        "CREATE INDEX IF NOT EXISTS runs_export_pending ON runs(created) WHERE export = 'pending'"),
    # 6: predicted and actual time to result of completed runs (schedulers/learning.py)
    5: (ESTIMATES_TABLE, "CREATE INDEX IF NOT EXISTS estimates_user ON estimates(user, framework, partition)"),
    # 7: logging a completed run to MLflow (schedulers/tracking.py): 'pending' with COMPLETED, as the
    # export, then 'logged' or 'failed'. Runs completed before stay NULL: they are not logged.
    6: ("ALTER TABLE runs ADD COLUMN tracking TEXT",
        "CREATE INDEX IF NOT EXISTS runs_tracking_pending ON runs(created) WHERE tracking = 'pending'"),
}


def statements(script: str) -> list[str]:
    """The statements of a schema script (no ';' inside strings in ours)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def private_file(path: Path) -> None:
    """Create ``path`` 0600 if it does not exist; tighten it (and SQLite's side files) if it does.
    ``OSError`` when it cannot be created."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE))
    except FileExistsError:
        pass  # an existing registry: only its mode is checked below
    for side in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = side.stat()
            if st.st_uid == os.geteuid() and st.st_mode & 0o077:
                side.chmod(PRIVATE_FILE)
        except FileNotFoundError:
            continue


def sqlite_words(path: Path, exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        hint = ("the file is damaged or is not a FlowTrain registry; move it away (a new one is created) or "
                "restore it from a backup")
    elif "disk is full" in text or "disk I/O" in text:
        hint = "the disk holding it is full or failing; free space there, or set FLOWTRAIN_HOME elsewhere"
    elif "locked" in text or "busy" in text:
        hint = "another process holds it locked for too long; try again"
    elif "readonly" in text or "unable to open" in text:
        hint = "it cannot be written here; check the permissions of the file and its folder"
    else:
        hint = "see SQLite's message"
    return f"run registry {path}: {text} ({hint})"


class RegistryError(FlowTrainError):
    """The registry cannot be read or written; the message names the database file or run directory."""


_F = TypeVar("_F", bound=Callable[..., Any])


def guarded(fn: _F) -> _F:
    """Turn any SQLite error inside a registry method (of an object with ``db_path``) into a
    :class:`RegistryError` naming the database file."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise RegistryError(sqlite_words(self.db_path, exc)) from exc

    return wrapper  # type: ignore[return-value]


class Transaction:
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


class Database:
    """The registry's SQLite file: one connection per thread and process (WAL: many readers, one
    writer), write transactions, and the schema brought to :data:`SCHEMA_VERSION` when it is opened.
    Cheap to share between threads; the registry's tables (:mod:`schedulers.registry.runs`,
    :mod:`schedulers.registry.sweeps`) read and write through it."""

    def __init__(self, path: Path) -> None:
        self.db_path = path
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (a new one after a fork)."""
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

    def tx(self) -> Transaction:
        """One write transaction (``with db.tx() as conn: …``)."""
        return Transaction(self.conn())

    @guarded
    def migrate(self) -> None:
        """Create the schema in a new file, or bring an older file up to :data:`SCHEMA_VERSION`."""
        db = self.conn()
        while True:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return
            if version > SCHEMA_VERSION:
                raise RegistryError(f"{self.db_path} has schema version {version}; this FlowTrain knows "
                                    f"{SCHEMA_VERSION}. Upgrade FlowTrain or use another FLOWTRAIN_HOME")
            if version != 0 and version not in MIGRATIONS:
                raise RegistryError(f"{self.db_path} has schema version {version}, which no migration in "
                                    "schedulers/registry/db.py upgrades; restore it from a backup or move it away")
            with self.tx() as tx:
                # Another process may have migrated between the check and this (exclusive) transaction.
                if tx.execute("PRAGMA user_version").fetchone()[0] != version:
                    continue
                steps = statements(SCHEMA) if version == 0 else MIGRATIONS[version]
                for statement in steps:
                    tx.execute(statement)
                tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION if version == 0 else version + 1}")
