"""The run registry as shared state at a centre: private files, its own errors for every SQLite
failure (a damaged file, a full disk), the run directory made after the row, schema migrations,
whole-string name checks, and run-directory files read without following symbolic links."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedulers.registry.db import SCHEMA_VERSION, RegistryError
from schedulers.registry.runs import RunRegistry

REPO = Path(__file__).resolve().parents[2]
SPEC = json.dumps({"name": "tiny", "data": {"source": "/data/alice/t.csv"}})


def new_run(reg: RunRegistry, user: str = "alice", **kw: object) -> str:
    return reg.create_run(user=user, spec_json=SPEC, spec_hash="abc", framework="torch", scheduler="local",
                          name="tiny", **kw).id  # type: ignore[arg-type]


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A permissive umask, as a careless service account might have: the registry must not rely on it."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_registry_and_run_directories_are_private(tmp_path: Path) -> None:
    reg = RunRegistry(home=tmp_path / "home")
    run_dir = reg.get(new_run(reg)).run_dir
    mode = {p: p.stat().st_mode & 0o777 for p in (reg.db_path, run_dir, reg.runs_dir, reg.home)}
    assert mode == {reg.db_path: 0o600, run_dir: 0o700, reg.runs_dir: 0o700, reg.home: 0o700}
    wal = reg.db_path.with_name("flowtrain.db-wal")
    assert wal.exists() and wal.stat().st_mode & 0o777 == 0o600  # SQLite gives its side files the db's mode


@pytest.mark.usefixtures("open_umask")
def test_a_world_readable_registry_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    RunRegistry(home=home).close()
    db = home / "flowtrain.db"
    db.chmod(0o644)
    RunRegistry(home=home)
    assert db.stat().st_mode & 0o777 == 0o600


def test_a_damaged_registry_is_a_registry_error_naming_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "flowtrain.db").write_bytes(b"this is not an SQLite database, it was overwritten\n" * 200)
    with pytest.raises(RegistryError) as err:
        RunRegistry(home=home)
    assert str(home / "flowtrain.db") in str(err.value) and "damaged" in str(err.value)


def test_a_registry_damaged_after_opening_raises_registry_error(tmp_path: Path) -> None:
    reg = RunRegistry(home=tmp_path / "home")
    run_id = new_run(reg)
    reg.close()
    with reg.db_path.open("r+b") as fh:  # keep the header, destroy the pages behind it
        fh.seek(100)
        fh.write(b"\xff" * 8000)
    for wal in reg.db_path.parent.glob("flowtrain.db-*"):
        wal.unlink()
    with pytest.raises(RegistryError, match=str(reg.db_path)):
        reg.get(run_id)


FULL_DISK = r"""
import json, resource, signal, sys
from pathlib import Path
from schedulers.registry.db import RegistryError
from schedulers.registry.runs import RunRegistry
reg = RunRegistry(home=sys.argv[1])
reg.get(sys.argv[2])  # reading still works
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write beyond the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
try:
    reg.create_run(user="alice", spec_json="{}", spec_hash="h", framework="torch", scheduler="local")
except RegistryError as exc:
    print(json.dumps({"error": str(exc), "type": type(exc).__name__}))
except Exception as exc:
    print(json.dumps({"error": str(exc), "type": type(exc).__name__}))
else:
    print(json.dumps({"error": None}))
"""


def test_full_disk_reports_the_real_error_and_leaves_no_directory(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes every write that grows a file fail as on a full disk."""
    reg = RunRegistry(home=tmp_path / "home")
    first = new_run(reg)
    conn = reg._conn()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # an empty WAL: the next write must grow it
    before = sorted(p.name for p in reg.runs_dir.iterdir())
    out = subprocess.run([sys.executable, "-B", "-c", FULL_DISK, str(reg.home), first], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["type"] == "RegistryError", result
    assert str(reg.db_path) in result["error"] and "full" in result["error"]
    assert "cannot rollback" not in result["error"]
    assert sorted(p.name for p in reg.runs_dir.iterdir()) == before  # no directory without a row
    assert [r.id for r in reg.list_runs()] == [first]


def test_run_directory_is_made_after_the_row_and_a_failure_takes_the_row_away(tmp_path: Path) -> None:
    reg = RunRegistry(home=tmp_path / "home")
    (reg.runs_dir / "blocked").write_text("a file where the run directory would go", encoding="utf-8")
    with pytest.raises(RegistryError, match="cannot create the run directory"):
        new_run(reg, run_id="blocked")
    assert reg.list_runs() == []


OLD_SCHEMA_V1 = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY, user TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL, spec_hash TEXT NOT NULL,
    framework TEXT NOT NULL, scheduler TEXT NOT NULL, partition TEXT, environment TEXT, job_id TEXT,
    state TEXT NOT NULL, exit_code INTEGER, signal INTEGER, reason TEXT NOT NULL DEFAULT '',
    restarts INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, submitted REAL, started REAL, ended REAL,
    run_dir TEXT NOT NULL, selection TEXT, log_tail TEXT, metrics_offset INTEGER NOT NULL DEFAULT 0,
    metrics_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_user_created ON runs(user, created DESC);
CREATE INDEX runs_created ON runs(created DESC);
CREATE TABLE run_states (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    state TEXT NOT NULL, time REAL NOT NULL, detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE metrics (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, seq INTEGER NOT NULL, event TEXT, step INTEGER,
    epoch INTEGER, time REAL, record TEXT NOT NULL, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""


def test_registry_upgrades_an_old_file(tmp_path: Path) -> None:
    """A version-1 file (what FlowTrain wrote before data_source, accounting and sweeps were recorded)
    is migrated in place, one version at a time."""
    home = tmp_path / "home"
    (home / "runs" / "old-run").mkdir(parents=True)
    conn = sqlite3.connect(home / "flowtrain.db")
    conn.executescript(OLD_SCHEMA_V1)
    conn.execute("INSERT INTO runs (id, user, name, spec, spec_hash, framework, scheduler, state, created, run_dir)"
                 " VALUES ('old-run', 'alice', 'old', ?, 'h', 'torch', 'local', 'COMPLETED', 1.0, ?)",
                 (SPEC, str(home / "runs" / "old-run")))
    conn.commit()
    conn.close()
    reg = RunRegistry(home=home)
    assert reg._conn().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    old = reg.get("old-run", "alice")
    assert (old.name, old.state.value, old.data_source, old.accounting) == ("old", "COMPLETED", "/data/alice/t.csv",
                                                                            None)
    assert (old.sweep_id, old.sweep_point, reg.list_sweeps()) == (None, None, [])
    assert (old.export, reg.pending_exports()) == (None, [])  # completed before: its export was tried then
    assert reg.pending_tracking() == []  # nor is it logged to MLflow when tracking is set up later
    new = reg.get(new_run(reg))
    assert new.data_source == "/data/alice/t.csv"
    assert [r.id for r in reg.list_runs("alice")] == [new.id, "old-run"]
    RunRegistry(home=home)  # opening an up-to-date file again changes nothing
    assert len(reg.list_runs()) == 2
    # the migrated file groups runs into sweeps like a new one
    sweep = reg.create_sweep(user="alice", name="s", spec_json=SPEC, sweep_json="{}", points=[{"training.seed": 1}],
                             scheduler="local", framework="torch", parallelism=1, metric="val_loss", goal="min")
    point = new_run(reg, run_id=f"{sweep.id}-0", sweep_id=sweep.id, sweep_point=0)
    assert [(r.id, r.sweep_point) for r in reg.sweep_runs(sweep.id)] == [(point, 0)] and reg.is_sweep(sweep.id)
    assert [s.id for s in reg.list_sweeps("alice")] == [sweep.id] and reg.list_sweeps("bob") == []


def test_a_newer_registry_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    RunRegistry(home=home).close()
    conn = sqlite3.connect(home / "flowtrain.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(RegistryError, match=f"schema version {SCHEMA_VERSION + 1}"):
        RunRegistry(home=home)


def test_a_version_without_a_migration_names_the_file_that_holds_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    RunRegistry(home=home).close()
    conn = sqlite3.connect(home / "flowtrain.db")
    conn.execute("PRAGMA user_version = -1")
    conn.close()
    with pytest.raises(RegistryError, match="schema version -1") as err:
        RunRegistry(home=home)
    named = str(err.value).split("no migration in ")[1].split()[0]
    assert "\nMIGRATIONS: " in (REPO / named).read_text(encoding="utf-8")


def test_user_and_run_id_are_checked_whole(tmp_path: Path) -> None:
    """``^…$`` with ``match`` lets "alice\\n" through; the registry uses fullmatch."""
    reg = RunRegistry(home=tmp_path / "home")
    with pytest.raises(RegistryError, match="user name"):
        new_run(reg, "alice\n")
    with pytest.raises(RegistryError, match="run id"):
        new_run(reg, run_id="run-1\n")
    assert reg.list_runs() == [] and not any(reg.runs_dir.iterdir())


def test_run_directory_links_are_never_followed(tmp_path: Path) -> None:
    reg = RunRegistry(home=tmp_path / "home")
    run_id = new_run(reg)
    root = reg.get(run_id).run_dir
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=hunter2\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "inner.txt").write_text("TOKEN=hunter2\n", encoding="utf-8")
    (root / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (root / "stolen.txt").symlink_to(secret)
    (root / "model").symlink_to(elsewhere)
    (root / "run.log").symlink_to(secret)
    (root / "metrics.jsonl").symlink_to(secret)
    (root / "result.json").symlink_to(secret)
    assert [a.path for a in reg.artifacts(run_id)] == ["train.py"]
    with reg.open_artifact(run_id, "train.py") as fh:
        assert fh.read() == b"print('hi')\n"
    for rel in ("stolen.txt", "model/inner.txt", "../../../secret.txt", "/etc/passwd"):
        with pytest.raises(RegistryError):
            reg.open_artifact(run_id, rel)
    assert reg.log_path(run_id) is None and reg.log_tail(run_id) == ""
    assert reg.sync_metrics(run_id) == 0
    with pytest.raises(RegistryError):
        reg.result(run_id)
