"""The executor interface shared by the local and Slurm backends.

Kept deliberately small (after submitit): an executor submits a prepared run
directory, reports the state of its jobs (one or many at once), cancels a job, says
when it started and ended and where its log is. :class:`Executor` lists everything the
run registry (:mod:`schedulers.runs`) calls, and every backend implements all of it.
Everything a backend reports is translated into one :class:`RunState` model so
that the registry and the portal never see backend-specific strings.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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

    def job_times(self, job_id: str) -> tuple[float | None, float | None]:
        """(started, ended) as the backend recorded them; ``None`` where it keeps no such time (the
        registry then records when it saw the change)."""

    def cancel(self, job_id: str) -> None:
        """Ask the backend to stop the job."""

    def log_path(self, job_id: str) -> Path | None:
        """The job's combined stdout/stderr file, if known."""
