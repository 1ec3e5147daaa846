"""The suite on two pytest-xdist workers (tests/conftest.py, scripts/test.sh): the tests marked ``alone``
run only in the serial phase, every other test only in the parallel one; the tests of the dev Slurm
cluster are one group and the other tests of their modules are not in it; a second worker of one run never
waits for its sibling's hold on the dev Slurm cluster."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest, slurm_fixture

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


# Collects under the parallel phase and prints each test's xdist group (what --dist loadgroup reads).
GROUPS = """
import sys, pytest
class Show:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        for i in items:
            print("GROUP", i.get_closest_marker("xdist_group").args[0], i.nodeid)
sys.exit(pytest.main(["-p", "no:cacheprovider", "--collect-only", "-q", "--flowtrain-phase", "parallel",
                      *sys.argv[1:]], plugins=[Show()]))
"""


def test_only_the_cluster_s_tests_of_a_module_join_the_cluster_group() -> None:
    """tests/cli/test_sweep_commands.py: its two Slurm sweeps run in the cluster's group, its local sweep
    (a minute of training on CI) beside them on the other worker, in the module's own group."""
    module = "tests/cli/test_sweep_commands.py"
    out = subprocess.run([sys.executable, "-c", GROUPS, module], cwd=REPO, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    groups = {nodeid.split("::")[1]: group for _, group, nodeid in
              (line.split(" ", 2) for line in out.stdout.splitlines() if line.startswith("GROUP "))}
    assert groups == {"test_local_sweep_runs_every_point_at_most_k_at_once": module,
                      "test_slurm_sweep_is_one_job_array": "slurm-cluster",
                      "test_cancelling_a_sweep_cancels_the_whole_array": "slurm-cluster",
                      "test_a_bad_sweep_is_refused_whole_before_anything_is_created": module}, groups


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


def _item(nodeid: str, **fixtures: tuple[str, str]) -> SimpleNamespace:
    """A collected test as tests/conftest.py reads it: its fixtures as name -> (scope, base id)."""
    defs = {name: [SimpleNamespace(scope=scope, baseid=baseid)] for name, (scope, baseid) in fixtures.items()}
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures), get_closest_marker=lambda name: None,
                           _fixtureinfo=SimpleNamespace(name2fixturedefs=defs))


def test_a_module_fixture_shared_with_the_cluster_s_tests_keeps_the_module_whole() -> None:
    """Split, a module-scoped fixture used on both sides would be built on both workers: that module stays
    whole in the cluster's group. pytest's own wide fixtures (no base id: tmp_path_factory) do not count."""
    cluster = ("session", "tests/schedulers")
    items = [_item("tests/x/test_m.py::test_on_slurm", slurm_cluster=cluster, trained=("module", "tests/x/test_m.py")),
             _item("tests/x/test_m.py::test_here", trained=("module", "tests/x/test_m.py")),
             _item("tests/x/test_n.py::test_on_slurm", slurm_cluster=cluster, tmp_path_factory=("session", "")),
             _item("tests/x/test_n.py::test_here", tmp_path_factory=("session", ""))]
    whole = conftest.whole_cluster_modules(items)
    assert whole == {"tests/x/test_m.py"}
    assert [conftest.group_of(i, whole, {}) for i in items] == ["slurm-cluster", "slurm-cluster", "slurm-cluster",
                                                               "tests/x/test_n.py"]
