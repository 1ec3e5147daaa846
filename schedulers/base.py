"""The executor interface shared by the local and Slurm backends.

Kept deliberately small (after submitit): an executor submits a prepared run
directory, reports the state of its jobs (one or many at once, with their start and end times
where it records them), cancels a job and says where its log is. :class:`Executor` lists
everything the orchestrator (:mod:`schedulers.reconcile`, :mod:`schedulers.launch`) calls, and
every backend implements all of it.
Everything a backend reports is translated into one :class:`RunState` model so
that the registry and the portal never see backend-specific strings.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable


class RunState(str, enum.Enum):  # noqa: UP042  (str() stays "RunState.X"; .value is the name)
    """One state model for every backend."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = frozenset(
    {RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED, RunState.TIMEOUT, RunState.NODE_FAIL}
)


@dataclass(frozen=True)
class Resources:
    """Compute resources of one job (mirrors the spec's training.resources)."""

    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_task: int = 1
    tasks_per_node: int = 1
    mem_mb: int | None = None
    time_limit_min: int = 60
    partition: str | None = None
    account: str | None = None  # Slurm account charged (None: the user's default)
    qos: str | None = None  # Slurm QoS (None: the association's default)


@dataclass(frozen=True)
class JobAccounting:
    """A finished job as the accounting database has it (``sacct``): what it cost and how it ended."""

    job_id: str
    state: str  # Slurm's word: COMPLETED, FAILED, ...
    exit_code: int | None  # None when unknown (or killed by a signal)
    signal: int | None
    elapsed_s: int | None  # wall-clock time
    cpu_time_s: float | None  # CPU time used (user + system, all tasks)
    max_rss_mb: float | None  # largest resident set of any task
    account: str = ""
    qos: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class JobRequest:
    """A prepared run directory and what to run in it."""

    run_dir: Path
    name: str
    framework: str  # torch | keras | paddle
    resources: Resources = field(default_factory=Resources)
    script: str = "train.py"
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    module: str | None = None  # an Lmod module job.sbatch loads before the launch line
    modulepath: tuple[str, ...] = ()
    python: str | None = None  # the selected environment's interpreter (None: the executor's own), so
    # that one executor per scheduler submits jobs for every environment
    restarts: int = 0  # how often job.sbatch starts the program again after a failed attempt (Slurm)


@dataclass(frozen=True)
class JobStatus:
    """What a backend knows about one job right now."""

    job_id: str
    state: RunState
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    restarts: int = 0
    nodes: str = ""
    started: float | None = None  # when the job started and ended, where the backend records it (the
    ended: float | None = None  # local executor); None: the registry records when it saw the change


@dataclass(frozen=True)
class ArraySubmission:
    """A group of jobs submitted as one: a Slurm job array, or the local executor's bounded group."""

    job_id: str  # the array's job id (Slurm) or the group's id (local): what cancels them all
    task_ids: tuple[str, ...]  # one job id per request, in the order given (Slurm: "<array>_<task>")


class SchedulerError(RuntimeError):
    """A scheduler could not be reached or refused a request; the message says which and why."""


@runtime_checkable
class Executor(Protocol):
    name: str

    def submit(self, request: JobRequest) -> str:
        """Start (or queue) the job; return its id."""

    def status(self, job_id: str) -> JobStatus:
        """Current state of a job."""

    def statuses(self, job_ids: Iterable[str]) -> Mapping[str, JobStatus]:
        """Current states of many jobs, asked in one go (one ``squeue``, one pass over the state files)."""

    def cancel(self, job_id: str) -> None:
        """Ask the backend to stop the job."""

    def log_path(self, job_id: str) -> Path | None:
        """The job's combined stdout/stderr file, if known."""


@runtime_checkable
class AccountingExecutor(Executor, Protocol):
    """An executor whose backend keeps an accounting database (Slurm's slurmdbd); the local executor
    keeps none and does not pretend to."""

    def accounting(self, job_id: str) -> JobAccounting | None:
        """The finished job's accounting record (elapsed, CPU time, max RSS, exit code); ``None`` where
        the cluster has no slurmdbd or no record yet."""


@runtime_checkable
class ArrayExecutor(Executor, Protocol):
    """An executor that runs many prepared run directories as one group, at most ``parallelism`` at
    once (a sweep, :mod:`schedulers.sweeps`). Both backends implement it."""

    def submit_array(self, requests: Sequence[JobRequest], parallelism: int, script_dir: Path) -> ArraySubmission:
        """Submit the requests (same framework, resources and environment; one run directory each) as
        one group; ``script_dir`` holds what the group shares (Slurm: the array's job script)."""

    def cancel_array(self, submission: ArraySubmission) -> None:
        """Stop every task of the group that has not ended (Slurm: one ``scancel`` of the array)."""
