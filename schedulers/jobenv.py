"""The environment a job starts with: an allow-list, the same for every executor.

A job must not inherit the portal's environment: it may hold the proxy secret's path, tokens, the
settings file, a database password, and a job's log is shown to its user. Every executor builds
the job's environment with :func:`job_environment`:

- the local executor passes exactly that to the wrapper it starts (``env=``);
- Slurm's commands transport runs ``sbatch --export=NAMES`` (only ``SLURM_*`` plus the named
  variables reach the job; Slurm 22.05 cannot combine ``--export=NONE`` with names, this form is
  its "nothing but these") from a process whose environment is exactly that; the launch lines
  inside the job use ``srun --export=ALL`` so job steps get the batch shell's (already clean)
  environment instead of inheriting the restriction;
- the pyslurm transport hands that dictionary to the submission as the job's environment.

The allow-list: :data:`ALLOWED_NAMES`, and names starting with :data:`ALLOWED_PREFIXES` (locale,
OpenMP threads, NCCL network tuning). The program's own variables (``FLOWTRAIN_RUN_DIR``,
``FLOWTRAIN_JOB_ID``, ``CUDA_VISIBLE_DEVICES`` for local jobs, ``MASTER_ADDR``…) are set by the
executor or the job script, never inherited.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",  # the frameworks' native libraries (module systems set these)
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "FLOWTRAIN_DATA_ROOT",  # generated programs resolve a relative data source against it
})
ALLOWED_PREFIXES = ("LC_", "OMP_", "NCCL_")


def allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def job_environment(source: Mapping[str, str] | None = None,
                    extra: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """The allowed variables of ``source`` (default: this process's environment), then ``extra``
    (the request's own variables, which may name anything)."""
    env = {k: v for k, v in (os.environ if source is None else source).items() if allowed(k)}
    env.update(extra)
    return env


def export_names(env: Mapping[str, str]) -> str:
    """``sbatch --export`` value naming ``env``'s variables (their values come from the submitting
    process's environment, so no value is ever parsed by sbatch's comma-separated list)."""
    return ",".join(sorted(env)) or "NONE"
