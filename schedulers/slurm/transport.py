"""The Slurm transport: the calls :class:`~schedulers.slurm.executor.SlurmExecutor` makes to slurmctld.

Three transports implement it: :class:`~schedulers.slurm.commands.SlurmCommands` (Slurm's own
client commands), :class:`~schedulers.slurm.rest_transport.SlurmRestTransport` (slurmrestd, JWT) and
:class:`~schedulers.slurm.pyslurm_transport.PyslurmTransport` (libslurm through pyslurm);
:func:`~schedulers.slurm.pyslurm_transport.choose_transport` picks one from the settings. A new
transport implements exactly these methods; tests/schedulers/test_interfaces.py checks every
transport against this list. Each method raises
:class:`~schedulers.base.SchedulerError`, naming the cause and the fix, when Slurm cannot answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from schedulers.base import JobAccounting
from schedulers.slurm.parsing import SlurmJob


@runtime_checkable
class SlurmTransport(Protocol):
    def ping(self, timeout_s: float = 5.0) -> bool:
        """True when the controller answers within ``timeout_s``; never raises."""

    def squeue_jobs(self) -> dict[str, SlurmJob]:
        """Every job the controller knows, by job id (one call, for reconciling many runs)."""

    def show_job(self, job_id: str) -> SlurmJob | None:
        """The controller's record of one job; ``None`` once it has forgotten the job."""

    def sacct_job(self, job_id: str) -> SlurmJob | None:
        """A finished job from accounting (or the jobcomp file); ``None`` when unknown there too."""

    def accounting(self, job_id: str) -> JobAccounting | None:
        """A finished job's accounting record from slurmdbd; ``None`` without slurmdbd or before it
        has recorded the job's end."""

    def sbatch(self, script: Path, *, cwd: Path | None = None) -> str:
        """Submit a batch script (its ``#SBATCH`` lines apply) from ``cwd``; return the job id."""

    def scancel(self, job_id: str) -> None:
        """Ask Slurm to stop the job."""
