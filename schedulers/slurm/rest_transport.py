"""The REST transport: Slurm driven through slurmrestd's OpenAPI, authenticated with JWT.

Implements :class:`~schedulers.slurm.transport.SlurmTransport` against the ``v0.0.38`` and
``dbv0.0.38`` plugins of Slurm 22.05 (the paths and fields below were read from the running
daemon's ``/openapi/v3`` on Debian 12's slurmrestd):

- ``GET /slurm/v0.0.38/ping`` → ``pings[].ping == "UP"``
- ``GET /slurm/v0.0.38/jobs`` and ``GET /slurm/v0.0.38/job/{id}`` → ``jobs[]``, the same records as
  ``squeue --json`` (``exit_code`` is a raw wait status); an unknown id answers HTTP 500 with
  error 2017 "Invalid job id specified".
- ``POST /slurm/v0.0.38/job/submit`` with ``{"script": ..., "job": {...}}`` → ``job_id``.
  slurmrestd does not read ``#SBATCH`` lines: :func:`job_properties` turns those that FlowTrain's
  ``job.sbatch`` holds into the job's properties, and refuses any other.
- ``DELETE /slurm/v0.0.38/job/{id}`` cancels, as ``scancel`` does.
- ``GET /slurmdb/v0.0.38/job/{id}`` → the job from slurmdbd (error 9003 "Nothing found" when unknown).

Two things Slurm 22.05's REST API cannot say, so this transport says them differently:

- ``--signal=B:USR1@120``: v0.0.38 refuses the ``B:`` flag ("Invalid SIGNAL specification"), so the
  warning goes to the job's steps only (``USR1@120``). A single-process job (no ``srun`` step) then
  gets no warning signal before its time limit, only SIGTERM at the limit (it checkpoints then).
- dbv0.0.38 reports exit code 0 for a job that exited 3 (as ``sacct --json`` does in 22.05): a finished
  job's exit code from slurmdbd is therefore reported unknown (``None``) when it contradicts the state.

Authentication: every request carries ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN``. The token
comes from ``scontrol token`` (renewed a minute before it expires), from ``$SLURM_JWT`` or from a file
(:class:`TokenSource`); the user name is the token's own ``sun`` claim.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shlex
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from schedulers.base import JobAccounting, RunState, SchedulerError
from schedulers.jobenv import job_environment
from schedulers.slurm.commands import DEFAULT_TIMEOUT_S, SlurmCommands, _validate_job_id
from schedulers.slurm.parsing import (
    UNRESOLVED_QOS,
    SlurmJob,
    _final_codes,
    _null,
    job_from_squeue_json,
    jobs_from_squeue_json,
    map_job_state,
)

API = "v0.0.38"
DB_API = "dbv0.0.38"
START_HINT = (
    "start it with scripts/devcluster.sh start --with rest (dev cluster) or ask the cluster's admins for "
    "slurmrestd's address (settings: slurm.rest_url or FLOWTRAIN_SLURM_REST_URL)"
)
TOKEN_LIFESPAN_S = 3600
RENEW_BEFORE_S = 60
_INVALID_JOB_ID = 2017  # ESLURM_INVALID_JOB_ID
_NOTHING_FOUND = 9003  # ESLURM_REST_EMPTY_RESULT


# --- tokens --------------------------------------------------------------------------------------


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT (its middle part), unverified: slurmctld verifies, we only read them."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise SchedulerError(f"the Slurm token is not a JWT (three dot-separated parts); it starts {token[:12]!r}")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError) as exc:
        raise SchedulerError(f"the Slurm token's claims cannot be read ({exc}); get a new one with `scontrol token`") \
            from exc
    if not isinstance(claims, dict) or not isinstance(claims.get("sun"), str):
        raise SchedulerError("the Slurm token names no user (no 'sun' claim); get one with `scontrol token`")
    return claims


@dataclass
class TokenSource:
    """Where the JWT comes from: ``"scontrol"`` (``scontrol token``, renewed before it expires),
    ``"env"`` (``$SLURM_JWT``, as sites hand it to users) or the path of a file holding it."""

    source: str = "scontrol"
    slurm_conf: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    _token: str = field(default="", init=False, repr=False)
    _claims: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def current(self) -> tuple[str, str]:
        """``(user name, token)``, renewed or re-read when the held one is about to expire."""
        if not self._token or self._expires_within(RENEW_BEFORE_S):
            self._token = self._fetch()
            self._claims = jwt_claims(self._token)
            if self._expires_within(0):
                raise SchedulerError(
                    f"the Slurm token from {self._where()} expired at "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self._claims['exp']))}; "
                    "get a new one with `scontrol token`"
                )
        return self._claims["sun"], self._token

    def _expires_within(self, seconds: float) -> bool:
        exp = self._claims.get("exp")
        return isinstance(exp, int | float) and exp - time.time() <= seconds

    def _where(self) -> str:
        return {"scontrol": "`scontrol token`", "env": "$SLURM_JWT"}.get(self.source, self.source)

    def _fetch(self) -> str:
        if self.source == "scontrol":
            commands = SlurmCommands(slurm_conf=self.slurm_conf, timeout_s=self.timeout_s)
            text = commands.run(
                ["scontrol", "token", f"lifespan={TOKEN_LIFESPAN_S}"],
                hint="the controller hands out tokens only with AuthAltTypes=auth/jwt in slurm.conf",
            ).stdout
        elif self.source == "env":
            text = os.environ.get("SLURM_JWT", "")
            if not text:
                raise SchedulerError("slurm.rest_token = \"env\" but SLURM_JWT is not set; run "
                                     "`export $(scontrol token)` or use rest_token = \"scontrol\"")
        else:
            try:
                text = Path(self.source).read_text(encoding="utf-8")
            except OSError as exc:
                raise SchedulerError(f"the Slurm token file {self.source} cannot be read: {exc.strerror}; "
                                     "write `scontrol token` output there or use rest_token = \"scontrol\"") from exc
        match = re.search(r"(?:SLURM_JWT=)?([A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+)", text)
        if not match:
            raise SchedulerError(f"{self._where()} gave no token (expected SLURM_JWT=<token>): {text.strip()[:200]!r}")
        return match.group(1)


# --- #SBATCH lines → job properties --------------------------------------------------------------


def _minutes(text: str) -> int:
    """sbatch's ``--time`` forms that FlowTrain writes: ``MM``, ``H:MM:SS``, ``D-HH:MM:SS``."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise ValueError(f"--time={text} is not D-HH:MM:SS, H:MM:SS or minutes")
    days, first, second, third = (int(g) if g else 0 for g in m.groups())
    if m.group(3) is None:  # minutes only
        return days * 1440 + first
    hours, mins, secs = (first, second, third) if m.group(4) is not None else (0, first, second)
    return days * 1440 + hours * 60 + mins + (1 if secs else 0)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def sbatch_options(script_text: str) -> list[tuple[str, str | None]]:
    """The ``#SBATCH --name[=value]`` lines at the top of a batch script, as sbatch reads them (it
    stops at the first line that is neither blank nor a comment)."""
    options: list[tuple[str, str | None]] = []
    for line in script_text.splitlines()[1:]:
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        m = re.fullmatch(r"#SBATCH\s+--([a-z-]+)(?:=(.*))?", stripped)
        if m:
            options.append((m.group(1), None if m.group(2) is None else _unquote(m.group(2).strip())))
        elif stripped.startswith("#SBATCH"):
            raise ValueError(f"{stripped!r}: only --long-option[=value] lines are understood")
    return options


_KNOWN_OPTIONS = frozenset({
    "requeue", "no-requeue", "job-name", "nodes", "ntasks-per-node", "cpus-per-task", "gres", "mem", "time",
    "partition", "account", "qos", "chdir", "output", "error", "signal", "array", "open-mode",
})


def job_properties(script_text: str, environment: Mapping[str, str]) -> dict[str, Any]:
    """v0.0.38 job properties for a batch script whose ``#SBATCH`` lines are FlowTrain's own
    (:mod:`schedulers.slurm.sbatch`). An option outside that set is a ``ValueError`` naming it: a
    silently dropped line would run the job with other resources than the script says."""
    job: dict[str, Any] = {"environment": dict(environment)}
    nodes, per_node = 1, 1
    for name, value in sbatch_options(script_text):
        if name not in _KNOWN_OPTIONS:
            raise ValueError(f"#SBATCH --{name} is not an option the REST transport can pass on")
        if name in ("requeue", "no-requeue"):
            job["requeue"] = name == "requeue"
            continue
        if value is None or value == "":
            raise ValueError(f"#SBATCH --{name} needs a value")
        if name == "job-name":
            job["name"] = value
        elif name == "nodes":
            nodes = int(value)
            job["nodes"] = [nodes, nodes]
        elif name == "ntasks-per-node":
            per_node = int(value)
            job["tasks_per_node"] = per_node
        elif name == "cpus-per-task":
            job["cpus_per_task"] = int(value)
        elif name == "gres":
            job["gres"] = value
        elif name == "mem":
            m = re.fullmatch(r"(\d+)M?", value)
            if not m:
                raise ValueError(f"#SBATCH --mem={value}: expected megabytes like 4000M")
            job["memory_per_node"] = int(m.group(1))
        elif name == "time":
            job["time_limit"] = _minutes(value)
        elif name in ("partition", "account", "qos"):
            job[name] = value
        elif name == "chdir":
            job["current_working_directory"] = value
        elif name == "array":  # a sweep's job array: "0-5%2"
            job["array"] = value
        elif name == "output":
            job["standard_output"] = value
        elif name == "error":
            job["standard_error"] = value
        elif name == "open-mode":  # append: a requeued job's log keeps its earlier attempts
            job["open_mode"] = value
        else:  # signal: v0.0.38 refuses "B:" (see the module docstring), so the steps get the warning.
            job["signal"] = re.sub(r"^R?B:", "", value)
    job["tasks"] = nodes * per_node
    return job


# --- records -------------------------------------------------------------------------------------


def job_from_slurmdb_json(job: Mapping[str, Any]) -> SlurmJob:
    """One element of ``GET /slurmdb/v0.0.38/job/{id}``'s ``jobs`` → :class:`SlurmJob`.

    The exit code there is wrong in 22.05 for failed jobs (0); a code that contradicts the state is
    reported as unknown.
    """
    state_doc = job.get("state") or {}
    slurm_state = str(state_doc.get("current", ""))
    state = map_job_state(slurm_state)
    exit_doc = job.get("exit_code") or {}
    code = exit_doc.get("return_code")
    signal_doc = exit_doc.get("signal")
    sig = signal_doc.get("signal_id") if isinstance(signal_doc, dict) else None
    pair: tuple[int | None, int | None] = (None, int(sig)) if sig else (None if code is None else int(code), None)
    if state is RunState.FAILED and pair == (0, None):
        pair = (None, None)
    exit_code, signal = _final_codes(state, pair)
    return SlurmJob(
        job_id=str(job["job_id"]),
        name=str(job.get("name", "")),
        slurm_state=slurm_state,
        state=state,
        exit_code=exit_code,
        signal=signal,
        reason=_null(str(state_doc.get("reason", ""))),
        restarts=0,
        nodes=_null(str(job.get("nodes", ""))),
        partition=str(job.get("partition", "")),
        workdir=_null(str(job.get("working_directory", ""))),
    )


def accounting_from_slurmdb_json(job: Mapping[str, Any]) -> JobAccounting | None:
    """One element of ``GET /slurmdb/v0.0.38/job/{id}``'s ``jobs`` → its accounting record (largest
    ``mem`` of the steps' per-task maxima as max RSS); ``None`` while the job has not ended."""
    record = job_from_slurmdb_json(job)
    if not record.state.is_final or job.get("qos") == UNRESOLVED_QOS:
        return None
    times = job.get("time") or {}
    total = times.get("total") or {}
    rss = [t.get("count", 0) for step in job.get("steps") or []
           for t in ((step.get("tres") or {}).get("requested") or {}).get("max") or [] if t.get("type") == "mem"]
    return JobAccounting(
        job_id=record.job_id, state=record.slurm_state, exit_code=record.exit_code, signal=record.signal,
        elapsed_s=times.get("elapsed") if isinstance(times.get("elapsed"), int) else None,
        cpu_time_s=(total.get("seconds", 0) + total.get("microseconds", 0) / 1e6) if total else None,
        max_rss_mb=round(max(rss) / 1024 / 1024, 1) if rss else None,
        account=str(job.get("account") or ""), qos=str(job.get("qos") or ""),
    )


# --- the transport -------------------------------------------------------------------------------


def _errors_text(errors: list[Any]) -> str:
    parts = []
    for e in errors:
        if isinstance(e, dict):
            text = " - ".join(str(e[k]) for k in ("error", "description") if e.get(k))
            parts.append(f"{text} (error {e.get('error_number', e.get('error_code', '?'))})")
        else:
            parts.append(str(e))
    return "; ".join(parts)


def _error_numbers(errors: list[Any]) -> set[int]:
    out = set()
    for e in errors:
        if isinstance(e, dict):
            for key in ("error_number", "error_code"):
                if isinstance(e.get(key), int):
                    out.add(e[key])
    return out


@dataclass
class SlurmRestTransport:
    """Talks to slurmrestd at ``url``; raises :class:`SchedulerError` for every failure.

    ``token``: where the JWT comes from (see :class:`TokenSource`). ``slurm_conf`` is only used to run
    ``scontrol token``.
    """

    url: str
    token: str = "scontrol"
    slurm_conf: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    _tokens: TokenSource = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise SchedulerError(f"slurmrestd's address {self.url!r} is not an http:// or https:// URL")
        self._tokens = TokenSource(self.token, slurm_conf=self.slurm_conf, timeout_s=self.timeout_s)

    @property
    def user(self) -> str:
        """The Slurm user the requests act as (the token's)."""
        return self._tokens.current()[0]

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                timeout_s: float | None = None, benign: frozenset[int] = frozenset()) -> dict[str, Any]:
        """One call; its ``errors`` raise unless every error number is in ``benign`` (then the
        document is returned and the caller reads its ``errors``)."""
        user, token = self._tokens.current()
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token, "Accept": "application/json",
                     **({"Content-Type": "application/json"} if data is not None else {})},
        )
        what = f"{method} {self.url}{path}"
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310  (http(s) checked above)
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SchedulerError(f"slurmrestd unreachable: {what} failed ({reason}); {START_HINT}") from exc
        if status == 401:
            raise SchedulerError(f"slurmrestd refused the credentials of user {user!r} ({what}: HTTP 401); "
                                 "it must run with rest_auth/jwt and slurmctld with AuthAltTypes=auth/jwt")
        if status == 404:
            raise SchedulerError(f"slurmrestd has no {path} ({what}: HTTP 404); start it with the "
                                 f"openapi/{API} and openapi/{DB_API} plugins (slurmrestd -s ...)")
        try:
            doc = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise SchedulerError(f"{what} answered HTTP {status} with text that is not JSON: {raw[:200]!r}") from exc
        errors = doc.get("errors") or []
        numbers = _error_numbers(errors)
        if errors and not (numbers and numbers <= benign):
            hint = (" (a rejected token reads 'slurmctld config is unable to load': check that the token is "
                    "current and was made with this cluster's key)") if "unable to load" in str(errors) else ""
            raise SchedulerError(f"{what} failed: {_errors_text(errors)}{hint}")
        return doc

    # -- reading ---------------------------------------------------------------------------------

    def ping(self, timeout_s: float = 5.0) -> bool:
        """True when slurmrestd answers and reports the controller UP; never raises."""
        try:
            doc = self.request("GET", f"/slurm/{API}/ping", timeout_s=timeout_s)
        except SchedulerError:
            return False
        return any(p.get("ping") == "UP" for p in doc.get("pings", []))

    def squeue_jobs(self) -> dict[str, SlurmJob]:
        doc = self.request("GET", f"/slurm/{API}/jobs")
        return jobs_from_squeue_json(doc.get("jobs", []))

    def show_job(self, job_id: str) -> SlurmJob | None:
        """The controller's record; an array task (``<array>_<task>``, which slurmrestd 22.05 does not
        look up) is read from its array's records."""
        array, _, task = _validate_job_id(job_id).partition("_")
        doc = self.request("GET", f"/slurm/{API}/job/{array}", benign=frozenset({_INVALID_JOB_ID}))
        jobs = doc.get("jobs") or []
        if doc.get("errors") or not jobs:
            return None
        return jobs_from_squeue_json(jobs).get(job_id) if task else job_from_squeue_json(jobs[0])

    def _slurmdb_record(self, job_id: str) -> Mapping[str, Any] | None:
        """slurmdbd's last record of a job, or of one task of an array (picked from the array's records)."""
        array, _, task = _validate_job_id(job_id).partition("_")
        doc = self.request("GET", f"/slurmdb/{API}/job/{array}", benign=frozenset({_NOTHING_FOUND}))
        jobs = doc.get("jobs") or []
        if task:
            jobs = [j for j in jobs if str((j.get("array") or {}).get("job_id")) == array
                    and str((j.get("array") or {}).get("task_id")) == task]
        return None if doc.get("errors") or not jobs else jobs[-1]

    def sacct_job(self, job_id: str) -> SlurmJob | None:
        """The job from slurmdbd; ``None`` when slurmdbd does not know it (or there is no slurmdbd)."""
        record = self._slurmdb_record(job_id)
        return None if record is None else replace(job_from_slurmdb_json(record), job_id=job_id)

    def accounting(self, job_id: str) -> JobAccounting | None:
        """The finished job from slurmdbd; ``None`` when it has no record of its end (yet)."""
        record = self._slurmdb_record(job_id)
        if record is None:
            return None
        found = accounting_from_slurmdb_json(record)
        return None if found is None else replace(found, job_id=job_id)

    # -- acting ----------------------------------------------------------------------------------

    def sbatch(self, script: Path, *, cwd: Path | None = None) -> str:
        """Submit a batch script (its ``#SBATCH`` lines become the job's properties); return the job id."""
        text = Path(script).read_text(encoding="utf-8")
        # Like the commands transport: the job starts from the allow-list (schedulers/jobenv.py), never
        # from the portal's own environment.
        env = job_environment()
        try:
            job = job_properties(text, env)
        except ValueError as exc:
            raise SchedulerError(f"{script}: {exc}") from exc
        job.setdefault("current_working_directory", str(cwd or Path(script).parent))
        doc = self.request("POST", f"/slurm/{API}/job/submit", {"script": text, "job": job})
        job_id = doc.get("job_id")
        if not isinstance(job_id, int):
            raise SchedulerError(f"slurmrestd accepted {script} but returned no job id: {shlex.quote(str(doc))[:300]}")
        return str(job_id)

    def scancel(self, job_id: str) -> None:
        self.request("DELETE", f"/slurm/{API}/job/{_validate_job_id(job_id)}")
