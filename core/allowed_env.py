"""The environment variables a process FlowTrain starts for a user's code may inherit: one allow-list.

The portal's environment may hold tokens, cloud keys, the proxy secret's path, the settings file and a
database password. Whatever runs a user's code — a job (:mod:`schedulers.jobenv` builds its
environment from this list), the equivalence check's and the model export's worker
(:func:`core.equivalence.run_worker`, which imports a run's ``model.py``) — starts from
:func:`allowed_environment`, never from the whole of ``os.environ``.

The list: :data:`ALLOWED_NAMES`, and names starting with :data:`ALLOWED_PREFIXES` (locale, OpenMP
threads, NCCL network tuning). It lives in ``core`` because it is framework- and scheduler-free and
``core`` may import nothing above it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",  # the frameworks' native libraries (module systems set these)
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
})
ALLOWED_PREFIXES = ("LC_", "OMP_", "NCCL_")


def allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def allowed_environment(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed variables of ``source`` (default: this process's environment)."""
    return {k: v for k, v in (os.environ if source is None else source).items() if allowed(k)}
