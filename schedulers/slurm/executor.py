"""The Slurm executor: :class:`~schedulers.base.Executor` over a :class:`~schedulers.slurm.transport.SlurmTransport`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from schedulers.base import ArraySubmission, JobAccounting, JobRequest, JobStatus, RunState, SchedulerError
from schedulers.slurm.commands import DEFAULT_TIMEOUT_S
from schedulers.slurm.parsing import SlurmJob
from schedulers.slurm.pyslurm_transport import PyslurmTransport, choose_transport
from schedulers.slurm.sbatch import DEFAULT_SIGNAL, SCRIPT_NAME, JobArray, log_file_name, render_sbatch
from schedulers.slurm.transport import SlurmTransport


class SlurmExecutor:
    """Submits prepared run directories with sbatch and follows the jobs.

    ``slurm_conf``: path of the cluster's slurm.conf (``None`` → ``$SLURM_CONF``). ``python``: the
    interpreter of the execution environment on the compute nodes (default ``sys.executable``).
    Status comes from the controller (``scontrol -o show job``); once a job has aged out of it
    (``MinJobAge``) from accounting, or the jobcomp file when there is no slurmdbd (``sacct -c``).
    """

    name = "slurm"

    def __init__(
        self,
        slurm_conf: str | None = None,
        *,
        python: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        requeue: bool = True,
        signal: str | None = DEFAULT_SIGNAL,
        commands: SlurmTransport | None = None,
    ) -> None:
        # pyslurm where it is installed and matches the cluster, else Slurm's own commands.
        self.commands: SlurmTransport = commands or choose_transport(slurm_conf, timeout_s=timeout_s)[0]
        self.python = python or sys.executable
        self.requeue_on_failure = requeue
        self.signal = signal
        self._log_paths: dict[str, Path] = {}

    # -- Executor protocol ------------------------------------------------------------------------

    def submit(self, request: JobRequest) -> str:
        """Write ``job.sbatch`` into ``request.run_dir`` and submit it; return the job id."""
        run_dir = Path(request.run_dir).resolve()
        if not run_dir.is_dir():
            raise SchedulerError(
                f"run directory {run_dir} does not exist; generate the program into it before submitting"
            )
        script = run_dir / SCRIPT_NAME
        text = render_sbatch(request, request.python or self.python, requeue=self.requeue_on_failure, signal=self.signal)
        with open(os.open(script, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            f.write(text)  # the run's user's alone, whatever the caller's umask (as the job's own files)
        job_id = self.commands.sbatch(script, cwd=run_dir)
        self._log_paths[job_id] = run_dir / log_file_name(job_id)
        return job_id

    def status(self, job_id: str) -> JobStatus:
        return self.job(job_id).to_status()

    def submit_array(self, requests: Sequence[JobRequest], parallelism: int, script_dir: Path) -> ArraySubmission:
        """One ``sbatch`` of a job array (``--array=0-N%K``, ``job.sbatch`` in ``script_dir``): task ``i``
        runs ``requests[i]``'s run directory; the tasks' job ids are ``<array id>_<i>``."""
        if not requests:
            raise SchedulerError("a job array needs at least one run directory")
        if isinstance(self.commands, PyslurmTransport):
            raise SchedulerError(
                "the pyslurm transport does not submit or follow job arrays (it addresses jobs by number, not "
                "as <array>_<task>); run sweeps with FLOWTRAIN_SLURM_TRANSPORT=commands or rest")
        first = requests[0]
        differing = [r.run_dir for r in requests
                     if (r.framework, r.resources, r.script, r.args, r.env, r.module, r.python) !=
                     (first.framework, first.resources, first.script, first.args, first.env, first.module, first.python)]
        if differing:
            raise SchedulerError(f"the tasks of one job array share framework, resources and program; "
                                 f"{differing[0]} differs from {first.run_dir}")
        missing = [r.run_dir for r in requests if not Path(r.run_dir).is_dir()]
        if missing:
            raise SchedulerError(f"run directory {missing[0]} does not exist; generate the programs first")
        array = JobArray(tuple(Path(r.run_dir).resolve() for r in requests), parallelism)
        try:
            text = render_sbatch(first, first.python or self.python, requeue=self.requeue_on_failure, signal=self.signal,
                                 array=array)
        except ValueError as exc:
            raise SchedulerError(str(exc)) from exc
        script = Path(script_dir).resolve() / SCRIPT_NAME
        script.write_text(text)
        array_id = self.commands.sbatch(script, cwd=script.parent)
        tasks = tuple(f"{array_id}_{i}" for i in range(len(requests)))
        for task, directory in zip(tasks, array.run_dirs, strict=True):
            self._log_paths[task] = directory / log_file_name(task)
        return ArraySubmission(array_id, tasks)

    def cancel_array(self, submission: ArraySubmission) -> None:
        """One ``scancel`` of the array job: Slurm ends its pending and running tasks together. An
        array whose tasks have all ended already is left as it is."""
        try:
            self.commands.scancel(submission.job_id)
        except SchedulerError as exc:
            if "already completing or completed" in str(exc) or "Invalid job id" in str(exc):
                return
            raise

    def cancel(self, job_id: str) -> None:
        """scancel; a job that already ended is left as it is. An unknown id raises."""
        job = self.commands.show_job(job_id)
        if job is None:
            if self.commands.sacct_job(job_id) is not None:
                return  # finished long ago
            raise SchedulerError(f"cannot cancel job {job_id}: Slurm does not know it")
        if job.state.is_final:
            return
        self.commands.scancel(job_id)

    def statuses(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        """Many jobs with one ``squeue --json`` call (plus sacct for those that aged out)."""
        wanted = [str(j) for j in job_ids]
        if not wanted:
            return {}
        live = self.commands.squeue_jobs()
        return {j: (live[j] if j in live else self.job(j)).to_status() for j in wanted}

    def accounting(self, job_id: str) -> JobAccounting | None:
        """sacct's record of the finished job (slurmdbd), through the transport."""
        return self.commands.accounting(job_id)

    def log_path(self, job_id: str) -> Path | None:
        """``<run dir>/slurm-<id>.out`` for jobs this executor (or an earlier one) submitted."""
        if job_id in self._log_paths:
            return self._log_paths[job_id]
        job = self.commands.show_job(job_id)
        if job is not None and job.stdout:
            return Path(job.stdout)
        if job is None:
            job = self.commands.sacct_job(job_id)
        if job is not None and job.workdir:
            return Path(job.workdir) / log_file_name(job_id)
        return None

    # -- beyond the protocol ----------------------------------------------------------------------

    def job(self, job_id: str) -> SlurmJob:
        """Everything known about one job; ``UNKNOWN`` state when no source knows it."""
        job = self.commands.show_job(job_id) or self.commands.sacct_job(job_id)
        if job is not None:
            return job
        return SlurmJob(
            job_id=str(job_id),
            name="",
            slurm_state="",
            state=RunState.UNKNOWN,
            exit_code=None,
            signal=None,
            reason="not known to slurmctld nor to accounting/jobcomp (wrong cluster, or purged)",
            restarts=0,
            nodes="",
            partition="",
        )

    def reachable(self, timeout_s: float = 5.0) -> bool:
        return self.commands.ping(timeout_s=timeout_s)
