"""The environment a job starts with: an allow-list, the same for every executor.

A job must not inherit the portal's environment: it may hold the proxy secret's path, tokens, the
settings file, a database password, and a job's log is shown to its user. Every executor builds
the job's environment with :func:`job_environment`:

- the local executor passes exactly that to the wrapper it starts (``env=``);
- Slurm's commands transport runs ``sbatch --export=ALL`` in a process whose environment *is* that
  allow-list (plus ``SLURM_CONF``), so the job gets exactly the allow-list and Slurm's ``SLURM_*``.
  Not ``--export=NONE``: on Slurm 22.05 (the dev cluster), ``NONE`` and a list of names both make
  slurmd load the job user's login environment (``SLURM_GET_USER_ENV=1``: ``su -`` profiles, module
  functions), which is not the allow-list, differs per site and delays the script's start. The
  launch lines inside the job use ``srun --export=ALL`` so job steps get the batch shell's (already
  clean) environment;
- the pyslurm transport hands that dictionary to the submission as the job's environment.

The allow-list (:mod:`core.allowed_env`, shared with the workers that import a run's ``model.py``):
:data:`ALLOWED_NAMES`, and names starting with :data:`ALLOWED_PREFIXES` (locale, OpenMP threads, NCCL
network tuning), plus ``SLURM_UMASK`` (:data:`JOB_UMASK`). The program's own variables (``FLOWTRAIN_RUN_DIR``,
``FLOWTRAIN_JOB_ID``, ``CUDA_VISIBLE_DEVICES`` for local jobs, ``MASTER_ADDR``…) are set by the
executor or the job script, never inherited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from core.allowed_env import ALLOWED_NAMES, ALLOWED_PREFIXES, allowed, allowed_environment

__all__ = ["ALLOWED_NAMES", "ALLOWED_PREFIXES", "JOB_UMASK", "allowed", "job_environment"]

# A job's files are its user's alone: 0700 folders, 0600 files. Slurm starts the job (and creates its
# log) with SLURM_UMASK when the environment sbatch gets has one; the job script sets it again
# (templates/slurm/job.sbatch.j2) and the local executor starts its jobs with it.
JOB_UMASK = 0o077


def job_environment(source: Mapping[str, str] | None = None,
                    extra: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """The allowed variables of ``source`` (default: this process's environment), then ``extra``
    (the request's own variables, which may name anything)."""
    env = allowed_environment(source)
    env["SLURM_UMASK"] = f"{JOB_UMASK:04o}"
    env.update(extra)
    return env
