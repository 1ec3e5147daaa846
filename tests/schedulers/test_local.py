"""The local executor with real subprocesses: queueing, exit codes, cancel, requeue, restarts.

The "programs" are tiny Python scripts that wait for a file the test creates (so a test decides
when a job ends without sleeping) and exit with a chosen code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedulers.base import Executor, JobRequest, Resources, RunState, SchedulerError
from schedulers.local import LocalExecutor, _alive
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]

# Waits for ./release (or exits at once without it when GO is set), then exits with ./code's number.
PROGRAM = """\
import os, sys, time
print("started", os.getpid(), "cuda", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
deadline = time.monotonic() + 120
while not os.path.exists("release") and time.monotonic() < deadline:
    time.sleep(0.05)
code = int(open("code").read()) if os.path.exists("code") else 0
print("exiting with", code, flush=True)
sys.exit(code)
"""

# Writes a checkpoint on SIGTERM and exits 3, as the generated programs do.
CHECKPOINTING = """\
import os, signal, sys, time
def stop(signum, frame):
    open("checkpoint", "w").write("step 7")
    print("checkpoint written on signal", signum, flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, stop)
open("ready", "w").close()
while True:
    time.sleep(0.05)
"""

STUBBORN = """\
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open("ready", "w").close()
while True:
    time.sleep(0.05)
"""

# First run: checkpoint and exit 3 (as if stopped by a shutdown); the rerun finds it and completes.
RESUMING = """\
import os, sys
if os.path.exists("checkpoint"):
    print("resumed from", open("checkpoint").read(), flush=True)
    sys.exit(0)
open("checkpoint", "w").write("step 5")
sys.exit(3)
"""


# Writes what a training program writes: a folder with a file in it, and a file beside it.
WRITES_OUTPUTS = """\
import os
os.makedirs("checkpoints", exist_ok=True)
open("checkpoints/ckpt-1.npz", "w").write("x")
open("metrics.jsonl", "w").write("{}")
print("wrote", flush=True)
"""


def file_modes(run_dir: Path) -> dict[str, int]:
    """Permission bits of what a job wrote in ``run_dir`` (the program file the test put there left out)."""
    return {str(p.relative_to(run_dir)): p.stat().st_mode & 0o777 for p in sorted(run_dir.rglob("*"))
            if p.name != "train.py"}


def make_job(tmp_path: Path, name: str, program: str = PROGRAM, code: int | None = None, cpus: int = 1,
             gpus: int = 0) -> JobRequest:
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "train.py").write_text(program)
    if code is not None:
        (run_dir / "code").write_text(str(code))
    return JobRequest(run_dir=run_dir, name=name, framework="torch",
                      resources=Resources(cpus_per_task=cpus, gpus_per_node=gpus))


def release(request: JobRequest) -> None:
    (Path(request.run_dir) / "release").touch()


def state_of(ex: LocalExecutor, job_id: str) -> RunState:
    return ex.status(job_id).state


def wait_state(ex: LocalExecutor, job_id: str, *states: RunState, timeout: float = 30) -> None:
    wait_until(lambda: state_of(ex, job_id) in states, timeout=timeout,
               message=lambda: f"job {job_id} to reach {[s.value for s in states]}: {ex.job(job_id)}")


@pytest.fixture
def executor(tmp_path: Path) -> LocalExecutor:
    return LocalExecutor(tmp_path / "state", cpus=2, gpus=0, kill_after_s=2.0)


def test_satisfies_protocol(executor: LocalExecutor) -> None:
    assert isinstance(executor, Executor)
    assert executor.name == "local"


def test_runs_program_logs_and_exit_zero(executor: LocalExecutor, tmp_path: Path) -> None:
    req = make_job(tmp_path, "ok", code=0)
    job_id = executor.submit(req)
    wait_state(executor, job_id, RunState.RUNNING, RunState.COMPLETED)
    release(req)
    wait_state(executor, job_id, RunState.COMPLETED)
    status = executor.status(job_id)
    assert status.exit_code == 0 and status.signal is None
    log = executor.log_path(job_id)
    assert log == Path(req.run_dir).resolve() / "run.log"
    text = log.read_text()
    assert "started" in text and "exiting with 0" in text
    started, ended = status.started, status.ended  # the executor's own times, recorded by the registry
    assert started is not None and ended is not None and ended >= started


@pytest.mark.parametrize(("code", "reason"), [(1, "exit code 1"), (2, "bad data or arguments")])
def test_nonzero_exit_is_failed_with_code(executor: LocalExecutor, tmp_path: Path, code: int, reason: str) -> None:
    req = make_job(tmp_path, f"fail{code}", code=code)
    release(req)
    job_id = executor.submit(req)
    wait_state(executor, job_id, RunState.FAILED)
    status = executor.status(job_id)
    assert status.exit_code == code
    assert reason in status.reason


def test_killed_by_signal_is_failed_with_signal(executor: LocalExecutor, tmp_path: Path) -> None:
    req = make_job(tmp_path, "killed", program="import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    job_id = executor.submit(req)
    wait_state(executor, job_id, RunState.FAILED)
    status = executor.status(job_id)
    assert status.exit_code is None and status.signal == 9
    assert "SIGKILL" in status.reason


def test_queue_bounded_by_cpus(executor: LocalExecutor, tmp_path: Path) -> None:
    """Capacity 2 CPUs: two 1-CPU jobs run, the third waits and starts when one ends."""
    reqs = [make_job(tmp_path, f"q{i}") for i in range(3)]
    ids = [executor.submit(r) for r in reqs]
    try:
        assert [state_of(executor, i) for i in ids] == [RunState.RUNNING, RunState.RUNNING, RunState.PENDING]
        assert "waiting for 1 CPUs" in executor.status(ids[2]).reason
        util = executor.utilisation()
        assert (util.total_cpus, util.alloc_cpus, util.idle_cpus) == (2, 2, 0)
        assert (util.running_jobs, util.pending_jobs) == (2, 1)
        release(reqs[0])
        wait_state(executor, ids[0], RunState.COMPLETED)
        wait_state(executor, ids[2], RunState.RUNNING)
        assert state_of(executor, ids[1]) == RunState.RUNNING
    finally:
        for r in reqs:
            release(r)
    for i in ids:
        wait_state(executor, i, RunState.COMPLETED)


def test_fifo_big_job_is_not_overtaken(executor: LocalExecutor, tmp_path: Path) -> None:
    small = make_job(tmp_path, "small")
    big = make_job(tmp_path, "big", cpus=2)
    later = make_job(tmp_path, "later")
    ids = [executor.submit(r) for r in (small, big, later)]
    try:
        assert [state_of(executor, i) for i in ids] == [RunState.RUNNING, RunState.PENDING, RunState.PENDING]
        release(small)
        wait_state(executor, ids[1], RunState.RUNNING)
        assert state_of(executor, ids[2]) == RunState.PENDING
    finally:
        for r in (small, big, later):
            release(r)
    wait_state(executor, ids[2], RunState.COMPLETED)


def test_gpus_are_assigned_through_cuda_visible_devices(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state", cpus=4, gpus=2)
    reqs = [make_job(tmp_path, f"g{i}", gpus=1) for i in range(3)]
    ids = [ex.submit(r) for r in reqs]
    try:
        assert [state_of(ex, i) for i in ids] == [RunState.RUNNING, RunState.RUNNING, RunState.PENDING]
        logs = [wait_until(lambda r=r: "started" in (Path(r.run_dir) / "run.log").read_text()
                           and (Path(r.run_dir) / "run.log").read_text()) for r in reqs[:2]]
        assert "cuda 0" in logs[0] and "cuda 1" in logs[1]
        release(reqs[1])
        wait_state(ex, ids[2], RunState.RUNNING)
        wait_until(lambda: "cuda 1" in (Path(reqs[2].run_dir) / "run.log").read_text())
    finally:
        for r in reqs:
            release(r)
    wait_state(ex, ids[0], RunState.COMPLETED)


def test_requests_beyond_the_machine_are_refused(executor: LocalExecutor, tmp_path: Path) -> None:
    with pytest.raises(SchedulerError, match="needs 4 CPUs.*offers 2"):
        executor.submit(make_job(tmp_path, "cpus", cpus=4))
    with pytest.raises(SchedulerError, match="needs 1 GPUs; this machine has 0"):
        executor.submit(make_job(tmp_path, "gpus", gpus=1))
    req = make_job(tmp_path, "nodes")
    with pytest.raises(SchedulerError, match="one machine.*2 nodes"):
        executor.submit(JobRequest(run_dir=req.run_dir, name="n", framework="torch", resources=Resources(nodes=2)))
    with pytest.raises(SchedulerError, match="does not exist"):
        executor.submit(JobRequest(run_dir=tmp_path / "missing", name="m", framework="torch"))


def test_cancel_running_job_checkpoints_and_is_cancelled(executor: LocalExecutor, tmp_path: Path) -> None:
    req = make_job(tmp_path, "cancel", program=CHECKPOINTING)
    job_id = executor.submit(req)
    wait_until(lambda: (Path(req.run_dir) / "ready").exists(), message="the program to start")
    executor.cancel(job_id)
    wait_state(executor, job_id, RunState.CANCELLED)
    status = executor.status(job_id)
    assert status.exit_code == 3  # checkpointed on SIGTERM, as documented
    assert (Path(req.run_dir) / "checkpoint").read_text() == "step 7"
    assert "cancelled" in status.reason


def test_cancel_escalates_to_sigkill(executor: LocalExecutor, tmp_path: Path) -> None:
    req = make_job(tmp_path, "stubborn", program=STUBBORN)
    job_id = executor.submit(req)
    wait_until(lambda: (Path(req.run_dir) / "ready").exists(), message="the program to start")
    t0 = time.monotonic()
    executor.cancel(job_id)
    wait_state(executor, job_id, RunState.CANCELLED, timeout=20)
    assert time.monotonic() - t0 >= 1.5  # kill_after_s=2: SIGTERM first, SIGKILL only later
    assert executor.status(job_id).signal == 9


def test_cancel_pending_job_never_starts(executor: LocalExecutor, tmp_path: Path) -> None:
    blocker = make_job(tmp_path, "blocker", cpus=2)
    waiting = make_job(tmp_path, "waiting")
    ids = [executor.submit(blocker), executor.submit(waiting)]
    assert state_of(executor, ids[1]) == RunState.PENDING
    executor.cancel(ids[1])
    assert state_of(executor, ids[1]) == RunState.CANCELLED
    release(blocker)
    wait_state(executor, ids[0], RunState.COMPLETED)
    assert state_of(executor, ids[1]) == RunState.CANCELLED
    assert not (Path(waiting.run_dir) / "run.log").exists()


def test_exit_3_without_cancel_is_requeued_and_resumes(executor: LocalExecutor, tmp_path: Path) -> None:
    req = make_job(tmp_path, "requeue", program=RESUMING)
    job_id = executor.submit(req)
    wait_state(executor, job_id, RunState.COMPLETED)
    status = executor.status(job_id)
    assert status.restarts == 1 and status.exit_code == 0
    assert "resumed from step 5" in (Path(req.run_dir) / "run.log").read_text()


def test_requeue_limit(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state", cpus=1, gpus=0, max_requeues=1)
    job_id = ex.submit(make_job(tmp_path, "always3", program="import sys\nsys.exit(3)\n"))
    wait_state(ex, job_id, RunState.FAILED)
    status = ex.status(job_id)
    assert (status.restarts, status.exit_code) == (1, 3)


def _submit_in_other_process(state_dir: Path, req: JobRequest, cpus: int) -> str:
    """Submit from a separate Python process that then exits: the "portal" that went away."""
    code = (
        "import sys; from pathlib import Path\n"
        "from schedulers.local import LocalExecutor\n"
        "from schedulers.base import JobRequest, Resources\n"
        f"ex = LocalExecutor({str(state_dir)!r}, cpus={cpus}, gpus=0)\n"
        f"print(ex.submit(JobRequest(run_dir=Path({str(req.run_dir)!r}), name='x', framework='torch',"
        f" resources=Resources(cpus_per_task={req.resources.cpus_per_task}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_new_executor_finds_running_job_and_final_exit_code(tmp_path: Path) -> None:
    """The portal restarts: a new process finds the running job, and later its exit code."""
    req = make_job(tmp_path, "survivor", code=2)
    job_id = _submit_in_other_process(tmp_path / "state", req, cpus=2)
    ex = LocalExecutor(tmp_path / "state", cpus=2, gpus=0)
    assert state_of(ex, job_id) == RunState.RUNNING
    assert _alive(ex.job(job_id).pid, ex.job(job_id).create_time)
    release(req)
    wait_state(ex, job_id, RunState.FAILED)
    assert ex.status(job_id).exit_code == 2


def test_job_that_ended_while_no_portal_ran(tmp_path: Path) -> None:
    """The job ends while nobody watches; the exit file and the wrapper's kick keep the result,
    and the queued job starts without any portal (checked on disk, without calling the executor)."""
    first = make_job(tmp_path, "first", cpus=2, code=0)
    second = make_job(tmp_path, "second", cpus=2, code=5)
    release(first)
    release(second)
    id1 = _submit_in_other_process(tmp_path / "state", first, cpus=2)
    id2 = _submit_in_other_process(tmp_path / "state", second, cpus=2)
    record = tmp_path / "state" / "jobs" / f"{id2}.json"
    wait_until(lambda: json.loads(record.read_text())["state"] == "FAILED", timeout=60,
               message=lambda: f"the wrapper's kick to run the queued job: {record.read_text()}")
    ex = LocalExecutor(tmp_path / "state", cpus=2, gpus=0)
    assert (state_of(ex, id1), ex.status(id1).exit_code) == (RunState.COMPLETED, 0)
    assert (state_of(ex, id2), ex.status(id2).exit_code) == (RunState.FAILED, 5)


def test_reused_pid_is_not_taken_for_the_job(executor: LocalExecutor, tmp_path: Path) -> None:
    """A record whose PID now belongs to another process (different creation time) is not alive."""
    req = make_job(tmp_path, "reused")
    job_id = executor.submit(req)
    path = executor.jobs_dir / f"{job_id}.json"
    release(req)
    wait_state(executor, job_id, RunState.COMPLETED)
    doc = json.loads(path.read_text())
    doc.update(state="RUNNING", pid=os.getpid(), create_time=1.0, exit_code=None, ended=None)
    (executor.jobs_dir / f"{job_id}.exit").unlink()
    path.write_text(json.dumps(doc))
    assert not _alive(os.getpid(), 1.0)
    status = executor.status(job_id)
    assert status.state == RunState.FAILED
    assert "without recording an exit status" in status.reason


ENV_DUMP = """\
import json, os
json.dump(dict(os.environ), open("env.json", "w"))
"""


def test_job_environment_is_the_allow_list(executor: LocalExecutor, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret in the portal's environment never reaches a job (nor the run.log it could print to)."""
    monkeypatch.setenv("PORTAL_DB_PASSWORD", "hunter2")
    monkeypatch.setenv("FLOWTRAIN_CONFIG", "/etc/flowtrain/secret-site.toml")
    monkeypatch.setenv("SLURM_JOB_ID", "777")  # the portal's own allocation
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    req = make_job(tmp_path, "env", program=ENV_DUMP)
    req = JobRequest(run_dir=req.run_dir, name="env", framework="torch", resources=req.resources,
                     env=(("MY_OPTION", "on"),))
    job_id = executor.submit(req)
    wait_state(executor, job_id, RunState.COMPLETED)
    env = json.loads((Path(req.run_dir) / "env.json").read_text())
    assert "PORTAL_DB_PASSWORD" not in env and "FLOWTRAIN_CONFIG" not in env and "SLURM_JOB_ID" not in env
    assert "hunter2" not in json.dumps(env)
    assert env["PATH"] == os.environ["PATH"] and env["OMP_NUM_THREADS"] == "3" and env["MY_OPTION"] == "on"
    assert env["FLOWTRAIN_JOB_ID"] == job_id and env["PYTHONUNBUFFERED"] == "1"


def test_paddle_launcher_logs_stay_out_of_the_run_directory(executor: LocalExecutor, tmp_path: Path) -> None:
    """paddle.distributed.launch dumps every worker's environment into --log_dir."""
    from dataclasses import asdict

    from schedulers.local import LocalJob

    req = make_job(tmp_path, "paddle", gpus=0)
    job = LocalJob(job_id="j1", run_dir=str(req.run_dir), name="p", framework="paddle", python="py",
                   script="train.py", args=[], env=[], resources=asdict(Resources(tasks_per_node=2)), cpus=2,
                   gpus=0, submitted=0.0)
    argv = executor._command(job)
    log_dir = Path(argv[argv.index("--log_dir") + 1])
    assert argv[1:3] == ["-m", "paddle.distributed.launch"]
    assert not log_dir.is_relative_to(req.run_dir) and log_dir.is_relative_to(executor.state_dir)


def test_a_jobs_files_are_private_whatever_the_callers_umask(executor: LocalExecutor, tmp_path: Path) -> None:
    """0700 folders and 0600 files, the log included, even from a caller with umask 022."""
    old = os.umask(0o022)
    try:
        req = make_job(tmp_path, "private", program=WRITES_OUTPUTS)
        job_id = executor.submit(req)
        wait_state(executor, job_id, RunState.COMPLETED)
    finally:
        os.umask(old)
    modes = file_modes(Path(req.run_dir))
    assert modes == {"checkpoints": 0o700, "checkpoints/ckpt-1.npz": 0o600, "metrics.jsonl": 0o600,
                     "run.log": 0o600}, {k: oct(v) for k, v in modes.items()}



PADDLE_RANKS = """import json, os
import paddle.distributed as dist
dist.init_parallel_env()
with open(f"rank-{dist.get_rank()}.json", "w") as fh:
    json.dump({"world": dist.get_world_size(), "gpus_label": os.environ.get("CUDA_VISIBLE_DEVICES")}, fh)
"""


@pytest.mark.frameworks
@pytest.mark.ddp
def test_paddle_runs_two_cpu_processes(executor: LocalExecutor, tmp_path: Path) -> None:
    """paddle.distributed.launch took an empty CUDA_VISIBLE_DEVICES for one GPU label and failed with an
    IndexError on its second process; a CPU job's two processes now start and form one group."""
    req = make_job(tmp_path, "paddle2", program=PADDLE_RANKS)
    req = JobRequest(run_dir=req.run_dir, name="paddle2", framework="paddle",
                     resources=Resources(cpus_per_task=1, tasks_per_node=2))
    job_id = executor.submit(req)
    wait_state(executor, job_id, *(s for s in RunState if s.is_final), timeout=240)
    log = (Path(req.run_dir) / "run.log").read_text()
    assert state_of(executor, job_id) is RunState.COMPLETED, log[-3000:]
    ranks = {p.name: json.loads(p.read_text()) for p in Path(req.run_dir).glob("rank-*.json")}
    assert ranks == {"rank-0.json": {"world": 2, "gpus_label": None}, "rank-1.json": {"world": 2, "gpus_label": None}}
