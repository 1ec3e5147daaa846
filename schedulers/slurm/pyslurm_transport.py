"""The pyslurm transport: Slurm driven through its C API (libslurm) via pyslurm 25.11.

Implements :class:`~schedulers.slurm.transport.SlurmTransport`, as the commands transport does, so
either can sit behind :class:`~schedulers.slurm.executor.SlurmExecutor`.
:func:`choose_transport` picks one per the settings' ``[slurm] transport`` (or
``FLOWTRAIN_SLURM_TRANSPORT``): ``auto`` takes pyslurm when ``import pyslurm`` works and its
``MAJOR.MINOR`` equals the cluster's Slurm release (pyslurm is built against one Slurm major release
and talks to no other), the commands transport otherwise; ``commands``, ``pyslurm`` and ``rest``
(:class:`~schedulers.slurm.rest_transport.SlurmRestTransport`, slurmrestd) are taken as asked.
``pyslurm`` forced where it cannot be used is an error, never a silent fallback.

pyslurm is imported lazily (inside :func:`probe` and the transport) so that this module imports
everywhere. Its API as used here was read from PySlurm/pyslurm's sources:

- ``pyslurm/__init__.py``: ``version()`` returns ``__version__`` ("25.11.0": Slurm major + patch).
- ``pyslurm/core/job/job.pyx``: ``Job.load(job_id)``, ``Jobs.load()`` (a multi-cluster map with
  ``.values()``), ``Job(job_id).cancel()``;
  attributes ``id``, ``name``, ``state``, ``state_reason``, ``requeue_count``, ``allocated_nodes``,
  ``partition``, ``exit_code``, ``exit_code_signal``, ``standard_output``, ``working_directory``.
- ``pyslurm/core/job/submission.pyx``: ``JobSubmitDescription(script=..., working_directory=...,
  environment=...)``, ``.load_sbatch_options()`` (reads the ``#SBATCH`` lines: without it they are
  ignored), ``.submit() -> int``.
- ``pyslurm/core/error.pyx``: ``RPCError`` with ``errno`` and ``msg``.

Finished jobs that slurmctld has forgotten are looked up with ``sacct`` through the commands
transport (pyslurm's ``db`` API needs slurmdbd; the dev cluster and small sites use the jobcomp file).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from schedulers.base import JobAccounting, SchedulerError
from schedulers.jobenv import job_environment
from schedulers.slurm.commands import DEFAULT_TIMEOUT_S, START_HINT, SlurmCommands, _validate_job_id
from schedulers.slurm.parsing import SlurmJob, _final_codes, _null, map_job_state
from schedulers.slurm.transport import SlurmTransport
from settings import SLURM_TRANSPORTS, SlurmSettings, slurm_settings
from settings.config import TRANSPORT_ENV

ENV_VAR = TRANSPORT_ENV
MODES = SLURM_TRANSPORTS
INSTALL_HINT = (
    "install pyslurm built against this cluster's Slurm into the portal's venv: "
    "SLURM_INCLUDE_DIR=<slurm>/include SLURM_LIB_DIR=<slurm>/lib pip install 'pyslurm==<MAJOR.MINOR>.*' "
    "(see docs/pyslurm.md), or set FLOWTRAIN_SLURM_TRANSPORT=commands"
)
_INVALID_JOB_ID_ERRNO = 2017  # ESLURM_INVALID_JOB_ID
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")

T = TypeVar("T")


# --- versions ------------------------------------------------------------------------------------


def major_minor(text: str) -> tuple[int, int]:
    """``"slurm 22.05.8"`` / ``"25.11.0"`` / ``"25.5.0"`` → ``(22, 5)`` / ``(25, 11)`` / ``(25, 5)``.

    Numeric, because pyslurm writes Slurm 25.05 as ``25.5``.
    """
    m = _VERSION_RE.search(text)
    if not m:
        raise ValueError(f"no version number like '25.11.0' in {text!r}")
    return int(m.group(1)), int(m.group(2))


def versions_match(pyslurm_version: str, slurm_version: str) -> bool:
    """True when pyslurm's ``MAJOR.MINOR`` is the Slurm release's (the patch levels are unrelated)."""
    return major_minor(pyslurm_version) == major_minor(slurm_version)


def cluster_version(commands: SlurmCommands) -> str:
    """``sinfo --version`` (``"slurm 22.05.8"``, Debian: ``"slurm-wlm 22.05.8"``); needs no controller."""
    return commands.run(["sinfo", "--version"]).stdout.strip()


def probe() -> tuple[ModuleType | None, str]:
    """Import pyslurm: ``(module, version)``, or ``(None, why not)``."""
    try:
        import pyslurm  # type: ignore[import-not-found]  # noqa: PLC0415  (optional, site-built)
    except ImportError as exc:
        if getattr(exc, "name", None) == "pyslurm":
            return None, "pyslurm not installed"
        return None, f"pyslurm is installed but does not import ({exc}); rebuild it against this Slurm"
    except OSError as exc:  # libslurm missing or of another release
        return None, f"pyslurm is installed but cannot load libslurm ({exc}); rebuild it against this Slurm"
    return pyslurm, str(pyslurm.version())


# --- the transport -------------------------------------------------------------------------------


def _rpc_text(exc: BaseException) -> str:
    errno = getattr(exc, "errno", None)
    msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return f"{msg} (Slurm errno {errno})" if errno is not None else msg


@dataclass
class PyslurmTransport:
    """Talks to slurmctld through pyslurm; raises :class:`SchedulerError` for every failure.

    ``slurm_conf`` must be set before pyslurm is first imported (libslurm reads ``SLURM_CONF``
    once, in ``slurm_init()`` at import): the transport sets it then and refuses another later.
    """

    slurm_conf: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    _mod: ModuleType = field(init=False, repr=False)
    _sacct: SlurmCommands = field(init=False, repr=False)

    def __post_init__(self) -> None:
        conf = self.slurm_conf or os.environ.get("SLURM_CONF") or None
        if conf and "pyslurm" not in sys.modules:
            os.environ["SLURM_CONF"] = conf
        elif conf and os.environ.get("SLURM_CONF") != conf:
            raise SchedulerError(
                f"pyslurm was already loaded with SLURM_CONF={os.environ.get('SLURM_CONF')!r}; it cannot "
                f"switch to {conf!r} in the same process (libslurm reads its configuration once); use "
                "FLOWTRAIN_SLURM_TRANSPORT=commands to drive several clusters from one portal"
            )
        mod, why = probe()
        if mod is None:
            raise SchedulerError(f"the pyslurm transport is unavailable: {why}; {INSTALL_HINT}")
        self._mod = mod
        self._sacct = SlurmCommands(slurm_conf=conf, timeout_s=self.timeout_s)

    @property
    def conf_text(self) -> str:
        return self._sacct.conf_text

    @property
    def version(self) -> str:
        return str(self._mod.version())

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one pyslurm call; its errors become :class:`SchedulerError` naming ``what``."""
        try:
            return fn()
        except SchedulerError:
            raise
        except Exception as exc:  # RPCError, ValueError from pyslurm's own validation, MemoryError
            raise SchedulerError(
                f"pyslurm {what} failed: {_rpc_text(exc)} (SLURM_CONF={self.conf_text}); if the controller "
                f"is down, {START_HINT}"
            ) from exc

    def _job(self, job: Any) -> SlurmJob:
        slurm_state = str(job.state or "")
        state = map_job_state(slurm_state)
        exit_code, sig = _final_codes(state, (job.exit_code, job.exit_code_signal))
        return SlurmJob(
            job_id=str(job.id),
            name=str(job.name or ""),
            slurm_state=slurm_state,
            state=state,
            exit_code=exit_code,
            signal=sig,
            reason=_null(job.state_reason),
            restarts=int(job.requeue_count or 0),
            nodes=_null(job.allocated_nodes),
            partition=str(job.partition or ""),
            stdout=_null(job.standard_output),
            workdir=_null(job.working_directory),
        )

    # -- reading ---------------------------------------------------------------------------------

    def ping(self, timeout_s: float = 5.0) -> bool:
        """True when slurmctld answers a job-list RPC within ``timeout_s`` (never raises)."""
        result: list[bool] = []

        def attempt() -> None:
            try:
                self._mod.Jobs.load()
                result.append(True)
            except Exception:  # noqa: BLE001  (any failure means "not reachable"; ping never raises)
                result.append(False)

        worker = threading.Thread(target=attempt, daemon=True)
        worker.start()
        worker.join(timeout_s)
        return bool(result and result[0])

    def squeue_jobs(self) -> dict[str, SlurmJob]:
        jobs = self._call("Jobs.load()", lambda: self._mod.Jobs.load())
        return {str(j.id): self._job(j) for j in jobs.values()}

    def show_job(self, job_id: str) -> SlurmJob | None:
        """The controller's record of a job, or ``None`` when it no longer knows it."""
        jid = int(_validate_job_id(job_id).split("_", 1)[0])
        try:
            job = self._mod.Job.load(jid)
        except Exception as exc:
            if getattr(exc, "errno", None) == _INVALID_JOB_ID_ERRNO or "Invalid job id" in str(exc):
                return None
            raise SchedulerError(
                f"pyslurm Job.load({jid}) failed: {_rpc_text(exc)} (SLURM_CONF={self.conf_text}); "
                f"if the controller is down, {START_HINT}"
            ) from exc
        return self._job(job)

    def sacct_job(self, job_id: str) -> SlurmJob | None:
        """Finished jobs come from accounting/jobcomp through ``sacct`` (see the module docstring)."""
        return self._sacct.sacct_job(job_id)

    def accounting(self, job_id: str) -> JobAccounting | None:
        """From slurmdbd through ``sacct``, as :meth:`sacct_job`."""
        return self._sacct.accounting(job_id)

    # -- acting ----------------------------------------------------------------------------------

    def sbatch(self, script: Path, *, cwd: Path | None = None) -> str:
        """Submit a batch script (its ``#SBATCH`` lines apply); return the job id."""
        # Like the commands transport: the job's environment is the allow-list (schedulers/jobenv.py).
        env = job_environment()
        if os.environ.get("SLURM_CONF"):
            env["SLURM_CONF"] = os.environ["SLURM_CONF"]

        def submit() -> int:
            desc = self._mod.JobSubmitDescription(
                script=str(script),
                working_directory=str(cwd or Path(script).parent),
                environment=env,
            )
            desc.load_sbatch_options()
            return int(desc.submit())

        return str(self._call(f"submission of {script}", submit))

    def scancel(self, job_id: str) -> None:
        jid = int(_validate_job_id(job_id).split("_", 1)[0])
        self._call(f"cancel of job {jid}", lambda: self._mod.Job(jid).cancel())


# --- choosing ------------------------------------------------------------------------------------


def choose_transport(
    slurm_conf: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, slurm: SlurmSettings | None = None
) -> tuple[SlurmTransport, str]:
    """``(transport, reason in words)`` per ``slurm`` (default: :func:`settings.slurm_settings`, i.e.
    ``FLOWTRAIN_SLURM_TRANSPORT`` > the settings file's ``[slurm]`` > ``auto``)."""
    conf = slurm_conf or os.environ.get("SLURM_CONF") or None
    commands = SlurmCommands(slurm_conf=conf, timeout_s=timeout_s)
    slurm = slurm or slurm_settings()
    mode = slurm.transport
    if mode == "commands":
        return commands, f"{slurm.source}=commands"
    if mode == "rest":
        from schedulers.slurm.rest_transport import SlurmRestTransport  # noqa: PLC0415  (only when asked)

        if slurm.rest_url is None:
            raise SchedulerError(f"{slurm.source}=rest but no slurmrestd address is set (slurm.rest_url)")
        rest = SlurmRestTransport(slurm.rest_url, token=slurm.rest_token, slurm_conf=conf, timeout_s=timeout_s)
        return rest, f"{slurm.source}=rest ({slurm.rest_url})"

    mod, why = probe()
    if mod is not None:
        slurm = cluster_version(commands)
        if versions_match(why, slurm):
            return PyslurmTransport(slurm_conf=conf, timeout_s=timeout_s), f"pyslurm {why} matches {slurm}"
        number = _VERSION_RE.search(slurm)
        why = f"pyslurm {why} does not match Slurm {number.group(0) if number else slurm}"
    if mode == "pyslurm":
        raise SchedulerError(f"{ENV_VAR}=pyslurm but the pyslurm transport is unavailable: {why}; {INSTALL_HINT}")
    return commands, why
