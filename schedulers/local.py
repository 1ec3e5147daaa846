"""The local executor: the embedded default when no Slurm is configured.

Runs the generated program on the portal's own machine: ``python train.py`` in the run directory,
in its own session (so one signal reaches the program and every worker it forks), stdout and
stderr to ``run.log``. A FIFO queue bounded by the machine's CPUs and GPUs decides when a job
starts: a job that does not fit stays PENDING until running jobs end.

Survives a portal restart: everything is kept in files under the state directory
(``$FLOWTRAIN_HOME/local``), one JSON record per job, changed only under a ``flock``. The program
is started by a tiny wrapper process (:data:`WRAPPER`) that waits for it, writes its exit status to
``jobs/<id>.exit`` atomically, and then "kicks" the queue (``python -m schedulers.local kick``), so
queued jobs start and final exit codes are recorded even while no portal is running. A new
:class:`LocalExecutor` finds running jobs by PID *and* process creation time (a reused PID is not
mistaken for the job).

A sweep's points are queued as one group (:meth:`LocalExecutor.submit_array`): at most ``parallelism``
of them run at once, in task order; a point held back by that limit lets other jobs pass it.

States: PENDING → RUNNING → COMPLETED (exit 0) | FAILED (other exit code, or killed by a signal) |
CANCELLED (cancelled by the user). ``cancel`` sends SIGTERM to the job's process group; the generated
program writes a checkpoint and exits with code 3; if the group is still alive ``kill_after_s`` later,
the wrapper SIGKILLs it. A job that exits with **3 without being cancelled** (it was stopped by a
signal from elsewhere, e.g. a shutdown, after checkpointing) is requeued like Slurm's ``--requeue``:
back to PENDING, ``restarts`` + 1, and its rerun resumes from the checkpoint (at most
``max_requeues`` times; then it is FAILED).

A job starts from the allow-listed environment of :mod:`schedulers.jobenv` (plus the request's own
variables), never the portal's whole environment.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from schedulers.base import ArraySubmission, JobRequest, JobStatus, Resources, RunState, SchedulerError
from schedulers.jobenv import JOB_UMASK, job_environment
from settings import flowtrain_home

REPO = Path(__file__).resolve().parents[1]
LOG_NAME = "run.log"
PARTITION = "local"
EXIT_CHECKPOINTED = 3  # the generated program's "stopped by a signal after writing a checkpoint"
DEFAULT_KILL_AFTER_S = 30.0
DEFAULT_MAX_REQUEUES = 3

# The wrapper: runs in the portal's interpreter, parent of the program, leader of its process
# group. argv: exit_path grace_s kick_json -- program argv…
WRAPPER = r"""# FlowTrain's local job wrapper (schedulers/local.py): waits for the program, records its exit.
import json, os, signal, subprocess, sys, time
exit_path, grace, kick = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
cmd = sys.argv[5:]

def write(record):
    tmp = exit_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, exit_path)

def on_stop(signum, frame):
    # The whole group got the signal: the program handles it (checkpoint, exit 3). Only arm
    # the kill timer here; exec resets this handler, so the program sees the default.
    if signal.getitimer(signal.ITIMER_REAL)[0] == 0:
        signal.setitimer(signal.ITIMER_REAL, grace)

def on_alarm(signum, frame):
    write({"exit_code": None, "signal": 9, "ended": time.time(),
           "detail": "still running %g s after SIGTERM: killed with SIGKILL" % grace})
    os.killpg(os.getpgrp(), signal.SIGKILL)

for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
    signal.signal(s, on_stop if s != signal.SIGUSR1 else (lambda n, f: None))
signal.signal(signal.SIGALRM, on_alarm)
try:
    proc = subprocess.Popen(cmd)
except OSError as exc:
    print("flowtrain: cannot start %r: %s" % (cmd[0], exc), file=sys.stderr, flush=True)
    rc = 127
else:
    rc = proc.wait()
signal.setitimer(signal.ITIMER_REAL, 0)
write({"exit_code": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None, "ended": time.time()})
if kick:
    try:
        subprocess.run(kick["argv"], cwd=kick["cwd"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print("flowtrain: could not start queued local jobs: %s" % exc, file=sys.stderr, flush=True)
sys.exit(rc if rc >= 0 else 128 - rc)
"""

# Popen objects of wrappers this process started, so that their exit is reaped (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass
class LocalJob:
    """One job's persistent record (``jobs/<id>.json``)."""

    job_id: str
    run_dir: str
    name: str
    framework: str
    python: str
    script: str
    args: list[str]
    env: list[list[str]]
    resources: dict[str, Any]
    cpus: int
    gpus: int
    submitted: float
    state: str = RunState.PENDING.value
    pid: int | None = None
    create_time: float | None = None
    gpu_ids: list[int] = field(default_factory=list)
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    restarts: int = 0
    cancel_requested: float | None = None
    group: str = ""  # a sweep's jobs share a group (submit_array) …
    group_limit: int = 0  # … of which at most this many run at once (0: no limit)

    @property
    def run_state(self) -> RunState:
        return RunState(self.state)

    def to_status(self) -> JobStatus:
        return JobStatus(job_id=self.job_id, state=self.run_state, exit_code=self.exit_code,
                         signal=self.signal, reason=self.reason, restarts=self.restarts,
                         nodes="localhost" if self.pid else "", started=self.started, ended=self.ended)


def describe_exit(exit_code: int | None, sig: int | None) -> str:
    """Words for the generated program's exit codes (docs/generated-program.md)."""
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name}"
    return {
        0: "exit code 0 (completed)",
        1: "exit code 1 (the program failed; see the end of the log)",
        2: "exit code 2 (bad data or arguments; see the log — not retried)",
        3: "exit code 3 (stopped by a signal after writing a checkpoint; a rerun resumes)",
        127: "exit code 127 (the interpreter or script could not be started)",
    }.get(exit_code if exit_code is not None else -1, f"exit code {exit_code}")


def _alive(pid: int | None, create_time: float | None) -> bool:
    """The job's wrapper still runs: same PID *and* same creation time, and not a zombie."""
    if pid is None:
        return False
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return False
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 1.0:
            return False  # the PID was reused by another process
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _reap() -> None:
    for pid, child in list(_CHILDREN.items()):
        if child.poll() is not None:
            del _CHILDREN[pid]


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    tmp.replace(path)


def _processes(r: Resources) -> int:
    """The job's processes: one per GPU, else one per task."""
    return r.gpus_per_node if r.gpus_per_node > 0 else r.tasks_per_node


class LocalExecutor:
    """Subprocesses on this machine, queued by CPUs/GPUs; state in files so restarts lose nothing.

    ``state_dir``: where job records live (default ``<home>/local``, :func:`settings.flowtrain_home`). ``python``: the
    interpreter of the execution environment (default this one). ``cpus``/``gpus``: the capacity
    (default: the CPUs this process may use, the GPUs ``nvidia-smi`` lists). ``kick``: let a job's
    wrapper start queued jobs when it ends (off only in tests that check the portal-side path).
    """

    name = "local"

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        python: str | None = None,
        cpus: int | None = None,
        gpus: int | None = None,
        kill_after_s: float = DEFAULT_KILL_AFTER_S,
        max_requeues: int = DEFAULT_MAX_REQUEUES,
        kick: bool = True,
    ) -> None:
        self.state_dir = Path(state_dir).resolve() if state_dir else flowtrain_home() / "local"
        self.jobs_dir = self.state_dir / "jobs"
        self.jobs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.python = python or sys.executable
        self.cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
        self._gpus = gpus
        self.kill_after_s = kill_after_s
        self.max_requeues = max_requeues
        self.kick = kick

    @property
    def gpus(self) -> int:
        if self._gpus is None:
            from schedulers.utilisation import local_utilisation

            self._gpus = local_utilisation().total_gpus
        return self._gpus

    # -- files ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.state_dir / "lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _record_path(self, job_id: str) -> Path:
        if not job_id or not all(c.isalnum() or c == "-" for c in job_id):
            raise SchedulerError(f"invalid local job id {job_id!r}; expected letters, digits and '-'")
        return self.jobs_dir / f"{job_id}.json"

    def _exit_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.exit"

    def _load(self, job_id: str) -> LocalJob:
        path = self._record_path(job_id)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SchedulerError(f"local job {job_id} is unknown to the local executor at {self.state_dir}") from None
        return LocalJob(**doc)

    def _save(self, job: LocalJob) -> None:
        _write_json(self._record_path(job.job_id), asdict(job))

    def _all(self) -> list[LocalJob]:
        jobs = []
        for path in self.jobs_dir.glob("*.json"):
            try:
                jobs.append(LocalJob(**json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, json.JSONDecodeError, TypeError) as exc:
                raise SchedulerError(f"local job record {path} is damaged ({exc}); move it away") from exc
        return sorted(jobs, key=lambda j: (j.submitted, j.job_id))

    # -- Executor protocol ------------------------------------------------------------------------

    def submit(self, request: JobRequest) -> str:
        """Queue the job; it starts at once when the machine has room, else when room frees up."""
        job = self._job_for(request)
        with self._locked():
            self._save(job)
            self._schedule()
        return job.job_id

    def submit_array(self, requests: Sequence[JobRequest], parallelism: int, script_dir: Path) -> ArraySubmission:
        """Queue the requests as one group, at most ``parallelism`` running at once (a sweep's points,
        like a Slurm job array's ``%K``); the group's id is the first job's. ``script_dir`` is unused."""
        if not requests:
            raise SchedulerError("a group of jobs needs at least one run directory")
        if not isinstance(parallelism, int) or parallelism < 1:
            raise SchedulerError(f"parallelism must be an integer >= 1, got {parallelism!r}")
        jobs = [self._job_for(r) for r in requests]  # every request checked before any is queued
        for job in jobs:
            job.group, job.group_limit = jobs[0].job_id, parallelism
        with self._locked():
            for job in jobs:
                self._save(job)
            self._schedule()
        return ArraySubmission(jobs[0].job_id, tuple(j.job_id for j in jobs))

    def cancel_array(self, submission: ArraySubmission) -> None:
        """Cancel each job of the group (pending ones end at once, running ones get SIGTERM); the last
        first, so no pending job of the group starts in a slot a cancelled one frees."""
        for job_id in reversed(submission.task_ids):
            self.cancel(job_id)

    def _job_for(self, request: JobRequest) -> LocalJob:
        """The record of a new job for ``request``, checked against this machine; not saved yet."""
        r = request.resources
        run_dir = Path(request.run_dir).resolve()
        if request.module is not None:
            raise SchedulerError(f"the local executor loads no environment modules ({request.module}); run it on Slurm")
        if not run_dir.is_dir():
            raise SchedulerError(f"run directory {run_dir} does not exist; generate the program into it first")
        if not (run_dir / request.script).is_file():
            raise SchedulerError(f"{run_dir / request.script} does not exist; generate the program first")
        procs = _processes(r)
        cpus = r.cpus_per_task * max(procs, 1)
        if r.nodes != 1:
            raise SchedulerError(f"the local executor runs on one machine; the job asks for {r.nodes} nodes. "
                                 "Set training.resources.nodes to 1 or use --scheduler slurm")
        if cpus > self.cpus:
            raise SchedulerError(f"the job needs {cpus} CPUs ({r.cpus_per_task} per task x {max(procs, 1)}); this "
                                 f"machine offers {self.cpus}. Lower training.resources.cpus_per_task")
        if r.gpus_per_node > self.gpus:
            raise SchedulerError(f"the job needs {r.gpus_per_node} GPUs; this machine has {self.gpus}. "
                                 "Lower training.resources.gpus_per_node or use --scheduler slurm")
        return LocalJob(
            job_id=f"{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}",
            run_dir=str(run_dir), name=request.name, framework=request.framework,
            python=request.python or self.python,
            script=request.script, args=list(request.args), env=[list(kv) for kv in request.env],
            resources=asdict(r), cpus=cpus, gpus=r.gpus_per_node, submitted=time.time(),
            reason="waiting for free CPUs/GPUs on this machine",
        )

    def status(self, job_id: str) -> JobStatus:
        return self.job(job_id).to_status()

    def cancel(self, job_id: str) -> None:
        """PENDING → CANCELLED at once; RUNNING: SIGTERM to its process group (SIGKILL after
        ``kill_after_s``), CANCELLED once it has ended. A finished job is left as it is."""
        with self._locked():
            job = self._refresh(self._load(job_id))
            if job.run_state == RunState.PENDING:
                job.state, job.ended, job.reason = RunState.CANCELLED.value, time.time(), "cancelled before it started"
                job.cancel_requested = job.ended
                self._save(job)
            elif job.run_state == RunState.RUNNING:
                job.cancel_requested = time.time()
                job.reason = "cancel requested: SIGTERM sent, the program may write a checkpoint"
                self._save(job)
                self._signal(job, signal.SIGTERM)
            self._schedule()

    def log_path(self, job_id: str) -> Path | None:
        return Path(self._load(job_id).run_dir) / LOG_NAME

    # -- beyond the protocol ----------------------------------------------------------------------

    def job(self, job_id: str) -> LocalJob:
        """The job's record, brought up to date (and the queue advanced)."""
        with self._locked():
            self._refresh(self._load(job_id))
            self._schedule()
            return self._load(job_id)

    def poll(self) -> list[LocalJob]:
        """Bring every job up to date and start queued jobs that fit; returns all jobs."""
        with self._locked():
            for job in self._all():
                if not job.run_state.is_final:
                    self._refresh(job)
            self._schedule()
            return self._all()

    def statuses(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        job_ids = list(job_ids)
        by_id = {j.job_id: j for j in self.poll()}
        missing = [j for j in job_ids if j not in by_id]
        if missing:
            raise SchedulerError(f"local job(s) {', '.join(missing)} unknown to the local executor at {self.state_dir}")
        return {j: by_id[j].to_status() for j in job_ids}

    def allocated(self) -> tuple[int, int, int, int]:
        """(CPUs, GPUs, running jobs, pending jobs) of the jobs this executor tracks."""
        jobs = self.poll()
        running = [j for j in jobs if j.run_state == RunState.RUNNING]
        pending = [j for j in jobs if j.run_state == RunState.PENDING]
        return sum(j.cpus for j in running), sum(j.gpus for j in running), len(running), len(pending)

    def utilisation(self) -> Any:
        """This machine as the partition ``local`` (see :func:`schedulers.utilisation.local_utilisation`)."""
        from schedulers.utilisation import local_utilisation

        cpus, gpus, running, pending = self.allocated()
        util = local_utilisation(alloc_cpus=cpus, alloc_gpus=gpus, running_jobs=running,
                                 pending_jobs=pending, gpus=self.gpus)
        if util.total_cpus != self.cpus:  # capacity configured smaller/larger than the machine
            node = replace(util.nodes[0], cpus=self.cpus, alloc_cpus=min(cpus, self.cpus))
            util = replace(util, nodes=(node,), total_cpus=self.cpus, alloc_cpus=node.alloc_cpus,
                           idle_cpus=node.idle_cpus)
        return util

    # -- internals (called with the lock held) ----------------------------------------------------

    def _signal(self, job: LocalJob, sig: signal.Signals) -> None:
        if job.pid is not None and _alive(job.pid, job.create_time):
            with contextlib.suppress(ProcessLookupError):  # ended between the check and the kill
                os.killpg(job.pid, sig)

    def _wrapper(self) -> Path:
        """:data:`WRAPPER` as a file in the state directory (readable in ``ps``, unlike ``-c CODE``)."""
        path = self.state_dir / "flowtrain-job-wrapper.py"
        if not path.is_file() or path.read_text(encoding="utf-8") != WRAPPER:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(WRAPPER, encoding="utf-8")
            tmp.replace(path)
        return path

    def _refresh(self, job: LocalJob) -> LocalJob:
        """Update a RUNNING job from its exit file / process; returns the (saved) record."""
        if job.run_state != RunState.RUNNING:
            return job
        exit_path = self._exit_path(job.job_id)
        if exit_path.exists():
            doc = json.loads(exit_path.read_text(encoding="utf-8"))
            self._finish(job, doc.get("exit_code"), doc.get("signal"), float(doc.get("ended") or time.time()),
                         doc.get("detail", ""))
        elif _alive(job.pid, job.create_time):
            if job.cancel_requested and time.time() > job.cancel_requested + self.kill_after_s + 5:
                self._signal(job, signal.SIGKILL)  # the wrapper's own timer did not fire
            return job
        else:
            # Gone without an exit status: the wrapper itself was killed (SIGKILL to the group,
            # OOM killer, machine restart).
            self._finish(job, None, None, time.time(), "the process ended without recording an exit status")
        return job

    def _finish(self, job: LocalJob, exit_code: int | None, sig: int | None, ended: float, detail: str) -> None:
        job.exit_code, job.signal, job.ended = exit_code, sig, ended
        words = describe_exit(exit_code, sig) if (exit_code is not None or sig is not None) else detail
        if exit_code == 0:
            job.state, job.reason = RunState.COMPLETED.value, ""
        elif job.cancel_requested:
            job.state, job.reason = RunState.CANCELLED.value, f"cancelled; {words}"
        elif exit_code == EXIT_CHECKPOINTED and job.restarts < self.max_requeues:
            job.state = RunState.PENDING.value
            job.restarts += 1
            job.reason = f"{words}: requeued (restart {job.restarts} of at most {self.max_requeues})"
            job.pid = job.create_time = job.ended = job.exit_code = job.signal = None
            self._exit_path(job.job_id).unlink(missing_ok=True)
        else:
            job.state, job.reason = RunState.FAILED.value, (words + (f"; {detail}" if detail and words != detail else ""))
        self._save(job)

    def _schedule(self) -> bool:
        """Start queued jobs in submission order while they fit (strict FIFO: a big job at the head
        is not overtaken, so it cannot starve). Returns whether anything started."""
        _reap()
        jobs = self._all()
        running = [j for j in jobs if j.run_state == RunState.RUNNING]
        free_cpus = self.cpus - sum(j.cpus for j in running)
        used_gpus = {g for j in running for g in j.gpu_ids}
        free_gpu_ids = [g for g in range(self.gpus) if g not in used_gpus]
        started = False
        group_running: dict[str, int] = {}
        for j in running:
            group_running[j.group] = group_running.get(j.group, 0) + 1
        for job in (j for j in jobs if j.run_state == RunState.PENDING):
            if job.group and job.group_limit and group_running.get(job.group, 0) >= job.group_limit:
                job.reason = f"waiting: at most {job.group_limit} points of this sweep run at once"
                self._save(job)
                continue  # held back by its group's limit, not by the machine: later jobs may pass it
            if job.cpus > free_cpus or job.gpus > len(free_gpu_ids):
                job.reason = (f"waiting for {job.cpus} CPUs / {job.gpus} GPUs; free now: {max(free_cpus, 0)} CPUs, "
                              f"{len(free_gpu_ids)} GPUs")
                self._save(job)
                break
            job.gpu_ids, free_gpu_ids = free_gpu_ids[: job.gpus], free_gpu_ids[job.gpus:]
            free_cpus -= job.cpus
            group_running[job.group] = group_running.get(job.group, 0) + 1
            self._start(job)
            started = True
        return started

    def _command(self, job: LocalJob) -> list[str]:
        procs = _processes(Resources(**job.resources))
        prog = [job.script, *job.args]
        if procs > 1 and job.framework == "torch":
            return [job.python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}", *prog]
        if procs > 1 and job.framework == "paddle":
            # The launcher dumps every worker's environment into its log folder: keep that out of the
            # run directory, in the executor's private state folder.
            logs = self.state_dir / "paddle-logs" / job.job_id
            return [job.python, "-m", "paddle.distributed.launch", "--log_dir", str(logs), "--nproc_per_node",
                    str(procs), *prog]
        return [job.python, *prog]  # keras: one process drives all local GPUs (MirroredStrategy)

    def _start(self, job: LocalJob) -> None:
        run_dir = Path(job.run_dir)
        env = job_environment(extra=[(k, v) for k, v in job.env])  # the allow-list, not the portal's environment
        env["PYTHONUNBUFFERED"] = "1"
        env["FLOWTRAIN_JOB_ID"] = job.job_id
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, job.gpu_ids))
        if not job.gpu_ids and job.framework == "paddle" and _processes(Resources(**job.resources)) > 1:
            # paddle.distributed.launch reads a set CUDA_VISIBLE_DEVICES, even an empty one, as GPU
            # labels (here one, "") and fails with an IndexError for a second process; left unset, it
            # finds no GPU on a host without one and runs its CPU workers over gloo.
            del env["CUDA_VISIBLE_DEVICES"]
        kick = {"argv": [sys.executable, "-m", "schedulers.local", "kick", str(self.state_dir),
                         "--cpus", str(self.cpus), "--gpus", str(self.gpus),
                         "--kill-after", str(self.kill_after_s), "--max-requeues", str(self.max_requeues)],
                "cwd": str(REPO)} if self.kick else None
        argv = [sys.executable, str(self._wrapper()), str(self._exit_path(job.job_id)), str(self.kill_after_s),
                json.dumps(kick), "--", *self._command(job)]
        self._exit_path(job.job_id).unlink(missing_ok=True)
        log_fd = os.open(run_dir / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with open(log_fd, "ab") as log:
            try:
                proc = subprocess.Popen(argv, cwd=run_dir, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                        umask=JOB_UMASK)
            except OSError as exc:
                job.state, job.ended, job.reason = RunState.FAILED.value, time.time(), f"could not start: {exc}"
                self._save(job)
                return
        _CHILDREN[proc.pid] = proc
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:
            create_time = None  # already gone: the exit file tells the rest
        job.state, job.pid, job.create_time = RunState.RUNNING.value, proc.pid, create_time
        job.started, job.reason = time.time(), ""
        self._save(job)


def main(argv: list[str] | None = None) -> int:
    """``python -m schedulers.local kick STATE_DIR``: what a finished job's wrapper runs."""
    parser = argparse.ArgumentParser(prog="python -m schedulers.local")
    sub = parser.add_subparsers(dest="command", required=True)
    kick = sub.add_parser("kick", help="record finished jobs and start queued ones")
    kick.add_argument("state_dir")
    kick.add_argument("--cpus", type=int, default=None)
    kick.add_argument("--gpus", type=int, default=None)
    kick.add_argument("--kill-after", type=float, default=DEFAULT_KILL_AFTER_S)
    kick.add_argument("--max-requeues", type=int, default=DEFAULT_MAX_REQUEUES)
    args = parser.parse_args(argv)
    executor = LocalExecutor(args.state_dir, cpus=args.cpus, gpus=args.gpus, kill_after_s=args.kill_after,
                             max_requeues=args.max_requeues)
    executor.poll()
    return 0


if __name__ == "__main__":
    sys.exit(main())
