"""Session fixture for tests that need the project's real dev Slurm cluster (marker ``slurm``).

It starts the cluster with ``scripts/devcluster.sh start`` when it is not running, points
``SLURM_CONF`` at it for the whole session, resumes nodes a previous interrupted test run left
down/drained (reason in ``RESUMABLE_REASONS``) and cancels that run's leftover jobs (name
starting with ``TEST_JOB_PREFIX``). Tests drain and down nodes and fill partitions, so one pytest
session at a time holds the cluster: the fixture takes an exclusive lock (``tests.lock`` in the
cluster's state directory) and others wait for it, up to ``LOCK_TIMEOUT_S``. Under pytest-xdist the
tests that use the cluster are one group, run by one worker (tests/conftest.py); a second worker of the
same run asking for the lock fails at once, naming that rule, rather than waiting for its sibling.
Locally, without Slurm installed, the tests are skipped with the command that fixes it; with
``CI=true`` they fail instead, never skip.

Use it from any conftest.py: ``from tests.slurm_fixture import slurm_cluster  # noqa: F401``.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.parsing import parse_scontrol_line
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[1]
DEVCLUSTER = REPO / "scripts" / "devcluster.sh"
FIX = "scripts/devcluster.sh install && scripts/devcluster.sh start"
TEST_REASON = "flowtrain-test"
TEST_JOB_PREFIX = "fttest"
# Reasons for which the fixture resumes a node: set by tests, or by slurmctld when two runs of one
# requeued job overlapped on a node (all dev nodes share one host, so a late kill can race a restart).
RESUMABLE_REASONS = (TEST_REASON, "Duplicate jobid", "Kill task failed")
LOCK_TIMEOUT_S = 1200.0


def scontrol_update(cmds: SlurmCommands, target: str, fields: Mapping[str, str]) -> None:
    """``scontrol update TARGET key=value …``: what a test (not FlowTrain) does to the cluster."""
    cmds.run(["scontrol", "update", target, *(f"{key}={value}" for key, value in fields.items())])


@dataclass(frozen=True)
class DevCluster:
    """The running dev cluster, and the administrator's actions tests take on it (drain and down
    nodes, requeue jobs): FlowTrain itself never does these, so they live here, not in schedulers/.

    ``rest_url``/``modulepath``: slurmrestd's address and the Lmod module files, when the cluster was
    started with those extras (``scripts/devcluster.sh start --with rest,lmod``), else ``None``.
    """

    slurm_conf: str
    commands: SlurmCommands
    rest_url: str | None = None
    modulepath: str | None = None
    extras: tuple[str, ...] = ()

    def need(self, extra: str) -> None:
        """Fail (CI) or skip (elsewhere) unless the cluster runs with ``extra`` (dbd, rest, lmod)."""
        if extra not in self.extras:
            _unavailable(f"the dev cluster runs without the extra '{extra}'; start it with: "
                         f"scripts/devcluster.sh start --with {extra} (scripts/test.sh asks for every extra)")

    def update_node(self, nodes: str, **fields: str) -> None:
        """``scontrol update nodename=NODES …`` (e.g. ``State="drain", Reason="…"``)."""
        scontrol_update(self.commands, f"nodename={nodes}", fields)

    def update_job(self, job_id: str, **fields: str) -> None:
        """``scontrol update jobid=ID …`` (e.g. ``StartTime="now"``: Slurm holds a requeued job ~120 s)."""
        scontrol_update(self.commands, f"jobid={job_id}", fields)

    def requeue_now(self, job_id: str, timeout_s: float = 30.0) -> None:
        """``scontrol requeue`` a running ``--requeue`` job and let it start again at once.

        Waits until the old run has been cleaned up (the controller shows the job COMPLETING meanwhile,
        and a start time set then is overwritten), then until the clock has entered the next second,
        then sets its start time to now. The requeue revoked the job's credential on its node, and
        slurmd compares credential times in whole seconds (``cred->ctime <= j->revoked``): a restart
        within the revoking second is killed as "Job credential revoked" and ends FAILED, exit 1.
        """
        self.commands.run(["scontrol", "requeue", job_id])
        wait_until(lambda: (job := self.commands.show_job(job_id)) is not None and job.slurm_state == "PENDING",
                   timeout=timeout_s, message=f"job {job_id} to be PENDING after the requeue")
        revoked_by = int(time.time())  # the revocation happened before the job showed PENDING
        wait_until(lambda: int(time.time()) > revoked_by, timeout=2.0, interval=0.05,
                   message="the clock to leave the second in which the credential was revoked")
        self.update_job(job_id, StartTime="now")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: Slurm tests must run, not skip)")
    pytest.skip(reason)


def _devcluster(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(DEVCLUSTER), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _tidy(cmds: SlurmCommands) -> None:
    """Undo what an interrupted earlier test run may have left: test jobs, drained test nodes."""
    for job in cmds.squeue_jobs().values():
        if job.name.startswith(TEST_JOB_PREFIX) and not job.state.is_final:
            cmds.scancel(job.job_id)
    for node in cmds.nodes():
        if not node.available and node.reason.startswith(RESUMABLE_REASONS):
            scontrol_update(cmds, f"nodename={node.name}", {"State": "resume"})
    # Account lists a test set on a partition (tests/schedulers/test_accounting.py); the dev cluster has none.
    for line in cmds.run(["scontrol", "-o", "show", "partition"]).stdout.splitlines():
        fields = parse_scontrol_line(line)
        if fields.get("AllowAccounts", "ALL") != "ALL":
            scontrol_update(cmds, f"partitionname={fields['PartitionName']}", {"AllowAccounts": "ALL"})


def _xdist_run() -> str | None:
    """The pytest-xdist run this worker belongs to (its workers share the id), or None without xdist."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or None


def _lock(path: Path) -> int:
    """Exclusive lock on ``path`` (held until the fd is closed), polling with a deadline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = path.read_text().strip()
            run = _xdist_run()
            if run and f"run {run}" in holder:
                os.close(fd)
                pytest.fail(
                    f"another worker of this test run holds the dev Slurm cluster ({holder}): every test that "
                    "uses it must be in the xdist group 'slurm-cluster' (tests/conftest.py gives it to tests "
                    "with the slurm_cluster fixture or the slurm marker)"
                )
            if time.monotonic() >= deadline:
                os.close(fd)
                pytest.fail(
                    f"another test session ({holder}) has held the dev Slurm cluster for over "
                    f"{LOCK_TIMEOUT_S:g} s ({path}); wait for it to finish or stop it"
                )
            time.sleep(1)
    os.ftruncate(fd, 0)
    run = _xdist_run()
    os.write(fd, (f"pid {os.getpid()}" + (f" run {run}" if run else "") + "\n").encode())
    return fd


# One setup per process: a module may import the fixture beside a conftest that does too, and
# pytest then builds two session fixtures; the second must share the first's lock (flock on a
# second descriptor in the same process would wait for itself forever).
@dataclass
class _Process:
    cluster: DevCluster | None = None
    lock_fd: int | None = None
    users: int = 0


_PROCESS = _Process()


def _setup() -> DevCluster:
    missing = [b for b in ("slurmctld", "slurmd", "sbatch", "munged") if shutil.which(b) is None]
    if missing:
        _unavailable(f"Slurm is not installed ({', '.join(missing)} missing); run: {FIX}")
    if os.geteuid() != 0:
        _unavailable(f"the dev Slurm cluster needs root (slurmd), uid is {os.geteuid()}; run as root: {FIX}")
    conf = _env_value("SLURM_CONF")
    if _PROCESS.lock_fd is None:
        _PROCESS.lock_fd = _lock(Path(conf).parent.parent / "tests.lock")
    cmds = SlurmCommands(slurm_conf=conf, timeout_s=15)
    if _devcluster("status", timeout=60).returncode != 0:
        if cmds.ping(timeout_s=5):
            _tidy(cmds)
        if _devcluster("status", timeout=60).returncode != 0:
            start = _devcluster("start", timeout=180)
            if start.returncode != 0:
                pytest.fail(
                    f"scripts/devcluster.sh start failed (exit {start.returncode}):\n{start.stderr}\n"
                    f"see the logs under {Path(conf).parent.parent / 'log'}"
                )
    _tidy(cmds)
    extras_file = Path(conf).parent.parent / "features"
    extras = tuple(extras_file.read_text().split()) if extras_file.is_file() else ()
    return DevCluster(slurm_conf=conf, commands=cmds, rest_url=_env_value("FLOWTRAIN_DEVCLUSTER_REST_URL", False),
                      modulepath=_env_value("FLOWTRAIN_DEVCLUSTER_MODULEPATH", False), extras=extras)


def _env_value(name: str, required: bool = True) -> str | None:
    """One ``export NAME=VALUE`` of ``scripts/devcluster.sh env``."""
    env_out = _devcluster("env", timeout=10).stdout
    m = re.search(rf"export {name}=(\S+)", env_out)
    assert m or not required, f"scripts/devcluster.sh env printed {env_out!r}; expected 'export {name}=...'"
    return m.group(1) if m else None


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[DevCluster]:
    if _PROCESS.cluster is None:
        _PROCESS.cluster = _setup()
    cluster = _PROCESS.cluster
    _PROCESS.users += 1
    mp = pytest.MonkeyPatch()
    mp.setenv("SLURM_CONF", cluster.slurm_conf)
    try:
        yield cluster
    finally:
        mp.undo()
        _PROCESS.users -= 1
        if _PROCESS.users == 0 and _PROCESS.lock_fd is not None:
            os.close(_PROCESS.lock_fd)
            _PROCESS.lock_fd = None
            _PROCESS.cluster = None
