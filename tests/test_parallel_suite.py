"""The suite on two pytest-xdist workers (tests/conftest.py, scripts/test.sh): the tests marked ``alone``
run only in the serial phase, every other test only in the parallel one; a second worker of one run never
waits for its sibling's hold on the dev Slurm cluster."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import slurm_fixture

REPO = Path(__file__).resolve().parents[1]
MODULE = "tests/schedulers/test_runs.py"  # one `alone` test (a 0.2 s bound) among quick ones


def collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode in (0, 5), out.stdout[-3000:] + out.stderr[-3000:]
    return [line for line in out.stdout.splitlines() if line.startswith(f"{MODULE}::")]


def test_the_alone_tests_run_in_the_serial_phase_only() -> None:
    alone = collected("--flowtrain-phase", "alone", MODULE)
    parallel = collected("--flowtrain-phase", "parallel", MODULE)
    assert alone == [f"{MODULE}::test_list_1000_runs_fast"]
    assert len(parallel) > 10 and not set(alone) & set(parallel)


def test_a_second_worker_of_the_run_asking_for_the_cluster_fails_at_once_naming_the_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "tests.lock"
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-a")
    holder = slurm_fixture._lock(lock)  # the worker that runs the group 'slurm-cluster'
    try:
        assert lock.read_text() == f"pid {os.getpid()} run run-a\n"
        with pytest.raises(pytest.fail.Exception, match="xdist group 'slurm-cluster'"):
            slurm_fixture._lock(lock)  # its sibling: refused now, not after LOCK_TIMEOUT_S
    finally:
        os.close(holder)
    fd = slurm_fixture._lock(lock)  # free again: the next holder takes it
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
