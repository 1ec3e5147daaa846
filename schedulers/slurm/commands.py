"""The commands transport: Slurm driven through its own client commands.

Every call runs with a timeout (with slurmctld down a client hangs ~9 s before it gives up on its
own) and every failure becomes a :class:`~schedulers.base.SchedulerError` whose message names the
command, what it said and how to fix it. What the commands print is parsed by the pure functions
of :mod:`schedulers.slurm.parsing`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedulers.base import JobAccounting, SchedulerError
from schedulers.jobenv import job_environment
from schedulers.slurm.parsing import (
    ACCOUNTING_FIELDS,
    SACCT_FIELDS,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    accounting_from_sacct,
    job_from_scontrol,
    jobs_from_sacct,
    jobs_from_squeue_json,
    nodes_from_sinfo_json,
    parse_sbatch_parsable,
    parse_scontrol_line,
    partitions_from_scontrol,
)

DEFAULT_TIMEOUT_S = 10.0  # squeue/sinfo give up on a dead controller after ~9 s; scontrol after ~18 s
START_HINT = "start it with scripts/devcluster.sh start (dev cluster) or ask the cluster's admins"

# --- running the commands ------------------------------------------------------------------------

_UNREACHABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
    "Unable to establish controller",
)
_NO_JOB = ("Invalid job id specified",)
_CONF_ERRORS = ("unable to status file", "s_p_parse_file", "Unable to process configuration file")


def _validate_job_id(job_id: str) -> str:
    if not re.fullmatch(r"\d+(_\d+)?", str(job_id)):
        raise SchedulerError(f"invalid Slurm job id {job_id!r}; expected digits like '123'")
    return str(job_id)


@dataclass(frozen=True)
class SlurmCommands:
    """Runs Slurm's client commands against one cluster.

    ``slurm_conf``: the cluster's ``slurm.conf`` (``None`` → the ``SLURM_CONF`` environment
    variable, or Slurm's compiled-in default). ``timeout_s`` bounds every call.
    """

    slurm_conf: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, timeout_s: float = DEFAULT_TIMEOUT_S) -> SlurmCommands:
        return cls(slurm_conf=os.environ.get("SLURM_CONF") or None, timeout_s=timeout_s)

    @property
    def conf_text(self) -> str:
        return self.slurm_conf or os.environ.get("SLURM_CONF") or "(Slurm's default /etc/slurm/slurm.conf)"

    def _env(self, clean_job_env: bool) -> dict[str, str]:
        env = dict(os.environ)
        if clean_job_env:
            # The job's environment is the allow-list (schedulers/jobenv.py), nothing else of the
            # portal's: no secrets, and no SLURM_*/SBATCH_* of the portal's own allocation.
            env = job_environment(env)
            if os.environ.get("SLURM_CONF"):
                env["SLURM_CONF"] = os.environ["SLURM_CONF"]
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        env["SLURM_TIME_FORMAT"] = "standard"
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        timeout_s: float | None = None,
        cwd: Path | None = None,
        benign: Iterable[str] = (),
        hint: str = "",
        clean_job_env: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run one command; raise :class:`SchedulerError` on any failure.

        A non-zero exit whose stderr contains one of ``benign`` is returned, not raised: the caller
        asked for that answer (e.g. "Invalid job id" when looking a job up).
        """
        timeout = self.timeout_s if timeout_s is None else timeout_s
        cmdline = shlex.join(args)
        try:
            proc = subprocess.run(
                list(args),
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=cwd,
                env=self._env(clean_job_env),
                check=False,
            )
        except FileNotFoundError as exc:
            raise SchedulerError(
                f"`{args[0]}` not found on PATH ({os.environ.get('PATH', '')}); install Slurm's "
                "client commands (Debian: apt-get install slurm-client; dev cluster: "
                "scripts/devcluster.sh install)"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SchedulerError(
                f"`{cmdline}` did not answer within {timeout:g} s: the Slurm controller at "
                f"SLURM_CONF={self.conf_text} is down or unreachable; {START_HINT}"
            ) from exc
        if proc.returncode == 0:
            return proc
        said = (proc.stderr.strip() or proc.stdout.strip() or "(no output)")[-2000:]
        if any(b in said for b in benign):
            return proc
        if any(u in said for u in _UNREACHABLE):
            raise SchedulerError(
                f"Slurm controller unreachable at SLURM_CONF={self.conf_text}: `{cmdline}` said: {said}; {START_HINT}"
            )
        if any(c in said for c in _CONF_ERRORS):
            raise SchedulerError(
                f"`{cmdline}` cannot read its configuration SLURM_CONF={self.conf_text}: {said}; set "
                "SLURM_CONF to the cluster's slurm.conf (dev cluster: "
                'eval "$(scripts/devcluster.sh env)")'
            )
        raise SchedulerError(
            f"`{cmdline}` failed with exit code {proc.returncode}: {said}" + (f"; {hint}" if hint else "")
        )

    # -- reading ---------------------------------------------------------------------------------

    def _json(self, args: Sequence[str]) -> dict[str, Any]:
        out = self.run(args).stdout
        try:
            doc = json.loads(out)
        except json.JSONDecodeError as exc:
            raise SchedulerError(
                f"`{shlex.join(args)}` printed output that is not JSON ({exc}); first 200 chars: "
                f"{out[:200]!r}; this transport expects Slurm >= 21.08 with --json support"
            ) from exc
        errors = doc.get("errors") or []
        if errors:
            # With the controller down, squeue/sinfo --json exit 0 with an "Unspecified error" here.
            if not self.ping(timeout_s=3):
                raise SchedulerError(
                    f"Slurm controller unreachable at SLURM_CONF={self.conf_text}: `{shlex.join(args)}` "
                    f"reported {errors} and `scontrol ping` does not see it UP; {START_HINT}"
                )
            raise SchedulerError(f"`{shlex.join(args)}` reported errors: {errors}")
        return doc

    def ping(self, timeout_s: float = 5.0) -> bool:
        """True when ``scontrol ping`` reports the controller UP (never raises on a down controller)."""
        try:
            proc = self.run(["scontrol", "ping"], timeout_s=timeout_s, benign=("DOWN",))
        except SchedulerError:
            return False
        return proc.returncode == 0 and "is UP" in proc.stdout

    def squeue_json(self) -> dict[str, Any]:
        """All jobs the controller knows, including those finished within ``MinJobAge``."""
        return self._json(["squeue", "--json"])

    def squeue_jobs(self) -> dict[str, SlurmJob]:
        return jobs_from_squeue_json(self.squeue_json().get("jobs", []))

    def sinfo_json(self) -> dict[str, Any]:
        return self._json(["sinfo", "--json"])

    def nodes(self) -> list[SlurmNode]:
        return nodes_from_sinfo_json(self.sinfo_json())

    def partitions(self) -> list[SlurmPartition]:
        return partitions_from_scontrol(self.run(["scontrol", "-o", "show", "partition"]).stdout)

    def show_job(self, job_id: str) -> SlurmJob | None:
        """The controller's record of a job, or ``None`` when it no longer knows it (aged out)."""
        proc = self.run(["scontrol", "-o", "show", "job", _validate_job_id(job_id)], benign=_NO_JOB)
        if proc.returncode != 0:
            return None
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if not lines:
            return None
        # An array job prints one line per task; the first is the one asked for.
        return job_from_scontrol(parse_scontrol_line(lines[0]))

    def sacct_job(self, job_id: str) -> SlurmJob | None:
        """A finished job from accounting, or from the jobcomp file (``sacct -c``) without slurmdbd."""
        job_id = _validate_job_id(job_id)
        args = ["sacct", "-P", "-j", job_id, "-o", ",".join(SACCT_FIELDS)]
        proc = self.run(args, benign=("accounting storage is disabled",))
        if proc.returncode != 0:
            proc = self.run(
                ["sacct", "-c", *args[1:]],
                hint="set JobCompType=jobcomp/filetxt (or run slurmdbd) so finished jobs stay visible",
            )
        return jobs_from_sacct(proc.stdout).get(job_id)

    def accounting(self, job_id: str) -> JobAccounting | None:
        """The finished job from slurmdbd (``sacct``); ``None`` without accounting storage (the jobcomp
        file holds no CPU time or memory) or before slurmdbd has its end."""
        job_id = _validate_job_id(job_id)
        proc = self.run(["sacct", "-P", "-j", job_id, "-o", ",".join(ACCOUNTING_FIELDS)],
                        benign=("accounting storage is disabled",))
        return accounting_from_sacct(proc.stdout, job_id) if proc.returncode == 0 else None

    # -- acting ----------------------------------------------------------------------------------

    def sbatch(self, script: Path, *, cwd: Path | None = None) -> str:
        """Submit a batch script; return the job id."""
        # sbatch runs in the allow-listed environment (clean_job_env) and exports exactly that: the job
        # gets SLURM_* and the allow-list (schedulers/jobenv.py explains why not --export=NONE).
        proc = self.run(
            ["sbatch", "--parsable", "--export=ALL", str(script)],
            cwd=cwd,
            clean_job_env=True,
            hint="check the #SBATCH lines in " + str(script) + " against `sinfo` (partition, GPUs, memory)",
        )
        try:
            return parse_sbatch_parsable(proc.stdout)
        except ValueError as exc:
            raise SchedulerError(str(exc)) from exc

    def scancel(self, job_id: str) -> None:
        self.run(["scancel", _validate_job_id(job_id)])
