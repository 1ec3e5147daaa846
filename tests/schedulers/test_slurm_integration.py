"""The Slurm executor, utilisation and the sbatch launch lines against the real dev cluster.

Needs ``scripts/devcluster.sh install`` once; the session fixture starts the cluster if needed.
Every wait is a poll with a deadline (tests.helpers.wait_until). Jobs are named ``fttest-*`` and
nodes are changed with reason ``flowtrain-test`` so that a later session can tidy up after an
interrupted one (tests/slurm_fixture.py).

The tests that exercise the transport (submit, follow, cancel, look up finished jobs, requeue) run
once per transport: Slurm's commands, and slurmrestd (marker ``slurmrestd``; the cluster must run
with ``--with rest``). The others (utilisation, node failures, launch lines) use the commands transport.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedulers.base import Executor, JobRequest, JobStatus, Resources, RunState, SchedulerError
from schedulers.jobenv import allowed
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.executor import SlurmExecutor
from schedulers.slurm.parsing import SlurmJob
from schedulers.slurm.rest_transport import SlurmRestTransport
from schedulers.slurm.transport import SlurmTransport
from schedulers.utilisation import PartitionUtilisation, slurm_utilisation
from tests.helpers import wait_until
from tests.slurm_fixture import DEVCLUSTER, TEST_JOB_PREFIX, TEST_REASON, DevCluster

pytestmark = pytest.mark.slurm

SLEEP = "import time\ntime.sleep(300)\n"
TRANSPORTS = ["commands", pytest.param("rest", marks=pytest.mark.slurmrestd)]


def make_transport(kind: str, cluster: DevCluster) -> SlurmTransport:
    """A fresh transport of ``kind`` to the dev cluster (REST: slurmrestd with a `scontrol token`)."""
    if kind == "commands":
        return SlurmCommands(slurm_conf=cluster.slurm_conf)
    cluster.need("rest")
    assert cluster.rest_url is not None
    return SlurmRestTransport(cluster.rest_url, token="scontrol", slurm_conf=cluster.slurm_conf)


@pytest.fixture(params=TRANSPORTS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ex(slurm_cluster: DevCluster, kind: str) -> Iterator[SlurmExecutor]:
    """An executor over each transport in turn, cancelling every job it submitted when the test ends."""
    yield from _cancelling(SlurmExecutor(slurm_conf=slurm_cluster.slurm_conf, commands=make_transport(kind, slurm_cluster)))


@pytest.fixture
def cmd_ex(slurm_cluster: DevCluster) -> Iterator[SlurmExecutor]:
    """An executor over Slurm's commands (for tests about the cluster rather than the transport)."""
    yield from _cancelling(SlurmExecutor(slurm_conf=slurm_cluster.slurm_conf, commands=make_transport("commands", slurm_cluster)))


def _cancelling(executor: SlurmExecutor) -> Iterator[SlurmExecutor]:
    submitted: list[str] = []
    real_submit = executor.submit

    def submit(request: JobRequest) -> str:
        job_id = real_submit(request)
        submitted.append(job_id)
        return job_id

    executor.submit = submit  # type: ignore[method-assign]
    yield executor
    for job_id in submitted:
        executor.cancel(job_id)


def make_request(tmp_path: Path, body: str, name: str = "job", framework: str = "torch", restarts: int = 0,
                 **res: object) -> JobRequest:
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "train.py").write_text(body)
    return JobRequest(
        run_dir=run_dir,
        name=f"{TEST_JOB_PREFIX}-{name}",
        framework=framework,
        resources=Resources(time_limit_min=10, **res),  # type: ignore[arg-type]
        restarts=restarts,
    )


def wait_state(ex: SlurmExecutor, job_id: str, *states: RunState, timeout: float = 30) -> JobStatus:
    def reached() -> JobStatus | None:
        status = ex.status(job_id)
        return status if status.state in states else None

    return wait_until(
        reached,
        timeout=timeout,
        interval=0.2,
        message=lambda: f"job {job_id} to reach {[s.value for s in states]} (now {ex.status(job_id)})",
    )


def gpu_util() -> PartitionUtilisation:
    return slurm_utilisation()["gpu"]


def test_executor_satisfies_protocol(ex: SlurmExecutor) -> None:
    assert isinstance(ex, Executor)
    assert ex.reachable()


def finished_record(ex: SlurmExecutor, job_id: str) -> SlurmJob:
    """The job as accounting has it (slurmdbd records a job shortly after it ends: polled)."""
    return wait_until(lambda: (job := ex.commands.sacct_job(job_id)) is not None and job.state.is_final
                      and job.workdir and job, timeout=30, message=f"accounting's record of job {job_id}")


def test_job_completes_writes_file_and_hostile_name_stays_inert(ex: SlurmExecutor, tmp_path: Path,
                                                                  slurm_cluster: DevCluster, kind: str) -> None:
    pwned = tmp_path / "pwned"
    body = (
        "import os, pathlib\n"
        "pathlib.Path('out.txt').write_text(os.environ['SLURM_JOB_ID'])\n"
        "print('hello from', os.environ['SLURMD_NODENAME'])\n"
    )
    request = make_request(tmp_path, body, name="ok")
    request = JobRequest(
        run_dir=request.run_dir,
        name=f'{TEST_JOB_PREFIX}"; touch {pwned}; #$(touch {pwned})',
        framework="torch",
        resources=request.resources,
    )
    job_id = ex.submit(request)
    status = wait_state(ex, job_id, *(s for s in RunState if s.is_final))
    assert (status.state, status.exit_code, status.signal) == (RunState.COMPLETED, 0, None)
    assert (request.run_dir / "out.txt").read_text() == job_id
    assert (request.run_dir / "job.sbatch").is_file()
    log = ex.log_path(job_id)
    assert log == request.run_dir / f"slurm-{job_id}.out"
    assert "hello from n" in log.read_text()
    assert not pwned.exists()
    # A fresh executor (portal restarted) finds the log through Slurm; accounting's record agrees.
    assert SlurmExecutor(commands=make_transport(kind, slurm_cluster)).log_path(job_id) == log
    done = finished_record(ex, job_id)
    assert (done.state, done.exit_code) == (RunState.COMPLETED, 0)
    assert done.workdir == str(request.run_dir)


def test_job_environment_lacks_the_portals_secrets(ex: SlurmExecutor, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch from the allow-listed environment: a secret of the portal's never reaches the job, and
    neither does a login environment Slurm would load for --export=NONE (SLURM_GET_USER_ENV)."""
    monkeypatch.setenv("PORTAL_DB_PASSWORD", "hunter2")
    monkeypatch.setenv("SBATCH_COMMENT", "from-the-portal")  # an sbatch option hidden in the environment
    body = "import json, os\njson.dump(dict(os.environ), open('env.json', 'w'))\n"
    request = make_request(tmp_path, body, name="env")
    job_id = ex.submit(request)
    status = wait_state(ex, job_id, *(s for s in RunState if s.is_final))
    assert status.state is RunState.COMPLETED, ex.log_path(job_id)
    env = json.loads((request.run_dir / "env.json").read_text())
    assert "PORTAL_DB_PASSWORD" not in env and "hunter2" not in json.dumps(env)
    assert env["PATH"] == os.environ["PATH"] and env["SLURM_JOB_ID"] == job_id
    assert env["FLOWTRAIN_RUN_DIR"] == str(request.run_dir.resolve())
    assert "from-the-portal" not in json.dumps(env)
    set_by_slurm_or_the_script = {"ENVIRONMENT", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "FLOWTRAIN_RUN_DIR",
                                  "PYTHONUNBUFFERED"}
    extra = {k for k in env if not (allowed(k) or k.startswith("SLURM") or k in set_by_slurm_or_the_script)}
    assert not extra and "SLURM_GET_USER_ENV" not in env, sorted(extra)


def test_a_jobs_files_are_private(ex: SlurmExecutor, tmp_path: Path) -> None:
    """0700 folders and 0600 files, Slurm's log included, even when the portal's umask is 022."""
    from tests.schedulers.test_local import WRITES_OUTPUTS, file_modes

    old = os.umask(0o022)
    try:
        request = make_request(tmp_path, WRITES_OUTPUTS, name="private")
        job_id = ex.submit(request)
    finally:
        os.umask(old)
    status = wait_state(ex, job_id, *(s for s in RunState if s.is_final))
    assert status.state is RunState.COMPLETED, ex.log_path(job_id)
    modes = file_modes(request.run_dir)
    assert modes == {"checkpoints": 0o700, "checkpoints/ckpt-1.npz": 0o600, "metrics.jsonl": 0o600,
                     "job.sbatch": 0o600, f"slurm-{job_id}.out": 0o600}, {k: oct(v) for k, v in modes.items()}


@pytest.mark.frameworks
@pytest.mark.ddp
def test_a_two_process_paddle_job_leaves_no_environment_in_its_run_directory(
        cmd_ex: SlurmExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """paddle.distributed.launch writes each worker's environment (backup_env.N.json, envlog.N) into its
    log folder: the job script gives it a private folder outside the run directory, and no file of
    the run holds a secret of the portal's environment."""
    from core.codegen import generate
    from tests.data.fixtures import spec_with_data

    monkeypatch.setenv("PORTAL_DB_PASSWORD", "hunter2-secret")
    run_dir = tmp_path / "paddle-run"
    generate(spec_with_data({"source": "sklearn:iris"}), "paddle").write(run_dir)
    request = JobRequest(run_dir=run_dir, name=f"{TEST_JOB_PREFIX}-paddle-env", framework="paddle",
                         resources=Resources(time_limit_min=10, tasks_per_node=2), args=("--max-steps", "2"))
    job_id = cmd_ex.submit(request)
    status = wait_state(cmd_ex, job_id, *(s for s in RunState if s.is_final), timeout=300)
    log = (run_dir / f"slurm-{job_id}.out").read_text(errors="replace")
    assert status.state is RunState.COMPLETED, log[-3000:]
    assert "paddle.distributed.launch" in (run_dir / "job.sbatch").read_text()
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.startswith(("backup_env", "envlog"))]
    assert not [p for p in files if b"hunter2-secret" in p.read_bytes() or b"PORTAL_DB_PASSWORD" in p.read_bytes()]


def test_exit_3_is_failed_with_exit_code_3(ex: SlurmExecutor, tmp_path: Path, kind: str) -> None:
    job_id = ex.submit(make_request(tmp_path, "import sys\nprint('bye')\nsys.exit(3)\n", name="exit3"))
    status = wait_state(ex, job_id, *(s for s in RunState if s.is_final))
    assert (status.state, status.exit_code, status.signal) == (RunState.FAILED, 3, None)
    assert status.reason == "NonZeroExitCode"
    # Same answer through the job list (raw wait status 768) and through accounting, except that
    # slurmdbd's REST API in 22.05 says 0 for this job: the REST transport reports it unknown.
    assert ex.statuses([job_id])[job_id].exit_code == 3
    done = finished_record(ex, job_id)
    assert (done.state, done.exit_code) == (RunState.FAILED, 3 if kind == "commands" else None)


def test_cancel_gives_cancelled(ex: SlurmExecutor, tmp_path: Path) -> None:
    job_id = ex.submit(make_request(tmp_path, SLEEP, name="cancel"))
    wait_state(ex, job_id, RunState.RUNNING)
    ex.cancel(job_id)
    status = wait_state(ex, job_id, RunState.CANCELLED)
    assert status.signal == 15 and status.exit_code is None
    ex.cancel(job_id)  # already ended: no error


def test_unknown_job(ex: SlurmExecutor) -> None:
    assert ex.status("999999").state is RunState.UNKNOWN
    with pytest.raises(SchedulerError, match="999999"):
        ex.cancel("999999")


def test_bad_partition_is_a_clear_error(ex: SlurmExecutor, tmp_path: Path) -> None:
    with pytest.raises(SchedulerError, match=r"(sbatch|job/submit).*(?i:invalid partition)"):
        ex.submit(make_request(tmp_path, "pass\n", name="badpart", partition="nosuch"))


def test_busy_gpus_show_in_utilisation(cmd_ex: SlurmExecutor, tmp_path: Path) -> None:
    ex = cmd_ex
    before = gpu_util()
    assert (before.total_gpus, before.idle_gpus, before.pending_jobs) == (16, 16, 0), (
        f"expected an idle dev cluster, found {before}"
    )
    body = "import os, pathlib, time\npathlib.Path('cvd').write_text(os.environ.get('CUDA_VISIBLE_DEVICES', ''))\ntime.sleep(300)\n"
    jobs = [ex.submit(make_request(tmp_path, body, name=f"gpu{i}", partition="gpu", gpus_per_node=4)) for i in range(2)]
    for job_id in jobs:
        wait_state(ex, job_id, RunState.RUNNING)
    busy = wait_until(lambda: (u := gpu_util()).idle_gpus == 8 and u, timeout=10, message=lambda: str(gpu_util()))
    assert (busy.alloc_gpus, busy.running_jobs) == (8, 2)
    assert busy.idle_cpus == before.idle_cpus - 8  # 4 tasks (one per GPU) x 1 CPU, per job
    assert busy.nodes_that_fit(gpus=4) == 2 and not busy.can_start_now(nodes=3, gpus=1)
    assert slurm_utilisation()["cpu"].default
    cvd = wait_until(lambda: (tmp_path / "gpu0" / "cvd").exists() and (tmp_path / "gpu0" / "cvd").read_text(), 10)
    assert cvd == "0,1,2,3"
    for job_id in jobs:
        ex.cancel(job_id)
    wait_until(lambda: gpu_util().idle_gpus == 16, timeout=30, message="GPUs to be released")


def test_drained_node_loses_its_capacity(slurm_cluster: DevCluster) -> None:
    before = gpu_util()
    cpu_before = slurm_utilisation()["cpu"]
    try:
        slurm_cluster.update_node("n3", State="drain", Reason=f"{TEST_REASON} drain")
        after = wait_until(
            lambda: (u := gpu_util()).idle_gpus == before.idle_gpus - 4 and u,
            timeout=10,
            message=lambda: str(gpu_util()),
        )
        assert after.idle_cpus == before.idle_cpus - 8
        assert [n.name for n in after.unavailable_nodes] == ["n3"]
        assert after.total_gpus == before.total_gpus
        assert slurm_utilisation()["cpu"].idle_gpus == cpu_before.idle_gpus  # n3 is not in cpu
    finally:
        slurm_cluster.update_node("n3", State="resume")
    wait_until(lambda: gpu_util().idle_gpus == before.idle_gpus, timeout=10, message="n3 to come back")


RESUME_BODY = (
    "import os, pathlib, sys, time\n"
    "n = int(os.environ.get('SLURM_RESTART_COUNT', '0'))\n"
    "pathlib.Path(f'run{n}').write_text(str(os.getpid()))\n"
    "if n == 0:\n"
    "    time.sleep(300)\n"
    "sys.exit(0)\n"
)


def test_requeue_job_survives_node_down(cmd_ex: SlurmExecutor, tmp_path: Path, slurm_cluster: DevCluster) -> None:
    """A node going down under a --requeue job: PENDING with Restarts=1, then it runs elsewhere.

    The job is started again while its old node is still down, as after a real failure. (Resuming
    that node first lets the restart land where the first run's kill may still be in flight; all dev
    nodes share one host and slurmctld then drains the node: "Duplicate jobid".)
    """
    ex = cmd_ex
    # a requeue costs an attempt of the restart budget (budget 0 ends the job: tests/schedulers/test_job_restarts.py)
    request = make_request(tmp_path, RESUME_BODY, name="nodedown", partition="gpu", restarts=1)
    job_id = ex.submit(request)
    node = wait_state(ex, job_id, RunState.RUNNING).nodes
    assert re.fullmatch(r"n[1-4]", node)
    wait_until(lambda: (request.run_dir / "run0").is_file(), timeout=20, message="the first run to start")
    try:
        slurm_cluster.update_node(node, State="down", Reason=f"{TEST_REASON} node down")
        requeued = wait_until(
            lambda: (s := ex.status(job_id)).state is RunState.PENDING and s.restarts >= 1 and s,
            timeout=30,
            message=lambda: f"job {job_id} to be requeued (now {ex.status(job_id)})",
        )
        assert requeued.exit_code is None
        wait_until(lambda: ex.job(job_id).slurm_state == "PENDING", timeout=30, message="Slurm to finish requeueing")
        slurm_cluster.update_job(job_id, StartTime="now")
        status = wait_state(ex, job_id, *(s for s in RunState if s.is_final), timeout=60)
    finally:
        slurm_cluster.update_node(node, State="resume")
    log = (request.run_dir / f"slurm-{job_id}.out").read_text()
    assert (status.state, status.exit_code, status.restarts) == (RunState.COMPLETED, 0, 1), log
    assert ex.status(job_id).nodes != node
    assert (request.run_dir / "run1").is_file()


def test_scontrol_requeue_restarts_the_job(ex: SlurmExecutor, tmp_path: Path, slurm_cluster: DevCluster) -> None:
    request = make_request(tmp_path, RESUME_BODY, name="requeue", restarts=1)
    job_id = ex.submit(request)
    wait_state(ex, job_id, RunState.RUNNING)
    wait_until(lambda: (request.run_dir / "run0").is_file(), timeout=20, message="the first run to start")
    slurm_cluster.requeue_now(job_id)
    status = wait_state(ex, job_id, *(s for s in RunState if s.is_final), timeout=60)
    log = (request.run_dir / f"slurm-{job_id}.out").read_text()
    assert (status.state, status.exit_code, status.restarts) == (RunState.COMPLETED, 0, 1), log
    assert (request.run_dir / "run1").is_file()


FAKE_PYTHON = """#!/bin/bash
# Stands in for the environment's python: records how the launch line called it, then exits 0.
printf '%s|%s|%s|%s|%s\\n' "${SLURM_PROCID:-}" "${SLURMD_NODENAME:-}" "${MASTER_ADDR:-}:${MASTER_PORT:-}" \
    "${CUDA_VISIBLE_DEVICES:-}" "$*" >> "$FLOWTRAIN_RUN_DIR/launch.log"
"""


def test_distributed_launch_lines_run_on_real_slurm(cmd_ex: SlurmExecutor, tmp_path: Path) -> None:
    """Each framework's multi-node launch line, run by real srun with a stand-in interpreter."""
    ex = cmd_ex
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    launcher = SlurmExecutor(python=str(fake))
    requests = {
        fw: make_request(tmp_path, "", name=f"launch-{fw}", framework=fw, partition="gpu", nodes=2, gpus_per_node=2)
        for fw in ("torch", "paddle", "keras")
    }
    jobs = {fw: launcher.submit(r) for fw, r in requests.items()}
    try:
        for fw, job_id in jobs.items():
            status = wait_state(ex, job_id, *(s for s in RunState if s.is_final))
            log = (requests[fw].run_dir / f"slurm-{job_id}.out").read_text()
            assert status.state is RunState.COMPLETED, f"{fw}: {status}\n{log}"
        calls = {fw: sorted((requests[fw].run_dir / "launch.log").read_text().splitlines()) for fw in requests}
    finally:
        for job_id in jobs.values():
            launcher.cancel(job_id)
    torch = [c.split("|") for c in calls["torch"]]
    assert [c[0] for c in torch] == ["0", "1"]  # one torchrun per node
    assert len({c[1] for c in torch}) == 2 and all(c[3] == "0,1" for c in torch)
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", c[2]) for c in torch)
    assert all(
        c[4].startswith(
            f"-m torch.distributed.run --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint={c[2]} "
        )
        and c[4].endswith(" train.py")
        for c in torch
    )
    paddle = [c.split("|") for c in calls["paddle"]]
    assert [c[4].split("--rank ")[1].split()[0] for c in paddle] == ["0", "1"]
    assert all(
        "-m paddle.distributed.launch --log_dir " in c[4] and " --master 127.0.0.1:" in c[4]
        and "--nproc_per_node 2 train.py" in c[4] and str(requests["paddle"].run_dir) not in c[4]
        for c in paddle
    )
    keras = [c.split("|") for c in calls["keras"]]
    assert [c[0] for c in keras] == ["0", "1", "2", "3"] and all(c[4] == "train.py" for c in keras)


@pytest.mark.alone
def test_unreachable_controller_is_a_clear_fast_error(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    text = Path(slurm_cluster.slurm_conf).read_text()
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=16999", text))
    cmds = SlurmCommands(slurm_conf=str(conf), timeout_s=3)
    t0 = time.monotonic()
    with pytest.raises(SchedulerError) as err:
        cmds.squeue_json()
    assert time.monotonic() - t0 < 10
    assert f"SLURM_CONF={conf}" in str(err.value) and "scripts/devcluster.sh start" in str(err.value)
    dead = SlurmExecutor(slurm_conf=str(conf), timeout_s=3)
    assert not dead.reachable(timeout_s=2)
    with pytest.raises(SchedulerError, match="unreachable") as down:
        dead.statuses(["1"])  # what the registry asks when it reconciles
    assert f"SLURM_CONF={conf}" in str(down.value) and "scripts/devcluster.sh start" in str(down.value)


@pytest.mark.alone
def test_devcluster_script_is_idempotent(slurm_cluster: DevCluster) -> None:
    t0 = time.monotonic()
    start = subprocess.run(["bash", str(DEVCLUSTER), "start"], capture_output=True, text=True, timeout=90, check=False)
    assert start.returncode == 0, start.stderr
    assert time.monotonic() - t0 < 15
    assert f"export SLURM_CONF={slurm_cluster.slurm_conf}" in start.stdout
    status = subprocess.run(
        ["bash", str(DEVCLUSTER), "status"], capture_output=True, text=True, timeout=30, check=False
    )
    assert status.returncode == 0, status.stderr
    states = dict(line.split() for line in status.stdout.splitlines())
    # Every node takes work: idle, running some or all of it, or finishing a job an earlier test ended
    # ("comp": its epilog is still running). A restart must not leave one down, drained or not responding ("*").
    working = {"idle", "mix", "alloc", "comp"}
    assert set(states) == {"n1", "n2", "n3", "n4"} and set(states.values()) <= working, states
    assert shutil.which("sinfo") and sys.executable
