"""Slurm's client output, parsed: job states and exit codes, ``scontrol -o`` lines, ``squeue``/``sinfo``
``--json`` documents, ``sacct`` records, partitions and their limits.

Pure functions over text and documents, no process is started here (:mod:`schedulers.slurm.commands`
runs the commands), so the unit tests feed them output captured from a real cluster
(tests/schedulers/data/). Output shapes are those of Slurm 22.05 (``--json`` is OpenAPI v0.0.38;
``scontrol`` has no ``--json`` there, so its one-line ``-o`` form is parsed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from schedulers.base import JobAccounting, JobStatus, RunState

# --- job states and exit codes -------------------------------------------------------------------

_STATE_MAP: dict[str, RunState] = {
    "PENDING": RunState.PENDING,
    "CONFIGURING": RunState.PENDING,  # nodes are being booted for it; user code not started
    "RESV_DEL_HOLD": RunState.PENDING,
    "REQUEUE_HOLD": RunState.REQUEUED,
    "REQUEUE_FED": RunState.REQUEUED,
    "REQUEUED": RunState.REQUEUED,
    "RUNNING": RunState.RUNNING,
    "COMPLETING": RunState.RUNNING,  # program ended, Slurm still cleaning up: not final yet
    "STAGE_OUT": RunState.RUNNING,
    "SIGNALING": RunState.RUNNING,
    "RESIZING": RunState.RUNNING,
    "SUSPENDED": RunState.RUNNING,
    "STOPPED": RunState.RUNNING,
    "COMPLETED": RunState.COMPLETED,
    "FAILED": RunState.FAILED,
    "OUT_OF_MEMORY": RunState.FAILED,
    "SPECIAL_EXIT": RunState.FAILED,
    "CANCELLED": RunState.CANCELLED,
    "REVOKED": RunState.CANCELLED,
    "TIMEOUT": RunState.TIMEOUT,
    "DEADLINE": RunState.TIMEOUT,
    "NODE_FAIL": RunState.NODE_FAIL,
    "BOOT_FAIL": RunState.NODE_FAIL,
    "PREEMPTED": RunState.PREEMPTED,
}


def map_job_state(slurm_state: str) -> RunState:
    """Slurm's job state (``RUNNING``, ``CANCELLED by 0``, ``FAILED+...``) → :class:`RunState`.

    Unknown or empty states map to ``UNKNOWN`` rather than raising: a newer Slurm may add states,
    and the portal must still show the job.
    """
    base = slurm_state.strip().split(" ", 1)[0].split("+", 1)[0].upper()
    return _STATE_MAP.get(base, RunState.UNKNOWN)


def decode_wait_status(raw: int) -> tuple[int | None, int | None]:
    """A raw wait status (``squeue --json``'s ``exit_code``) → ``(exit_code, signal)``.

    768 → ``(3, None)`` (exited with 3); 9 → ``(None, 9)`` (killed by SIGKILL). A process killed
    by a signal has no exit code, so ``exit_code`` is ``None`` then.
    """
    if raw < 0:
        raise ValueError(f"wait status must be >= 0, got {raw}")
    sig = raw & 0x7F
    if sig and sig != 0x7F:
        return None, sig
    return (raw >> 8) & 0xFF, None


def parse_exit_pair(text: str) -> tuple[int | None, int | None]:
    """scontrol/sacct ``ExitCode=3:0`` (``exit:signal``) → ``(exit_code, signal)``.

    ``0:9`` → ``(None, 9)``, same convention as :func:`decode_wait_status`.
    """
    m = re.fullmatch(r"\s*(\d+):(\d+)\s*", text)
    if not m:
        raise ValueError(f"expected an exit code of the form EXIT:SIGNAL like '3:0', got {text!r}")
    code, sig = int(m.group(1)), int(m.group(2))
    if sig:
        return None, sig
    return code, None


# --- scontrol -o text ----------------------------------------------------------------------------

# A key starts a token: at the line start or after whitespace, letters then [\w/:.-], then '='.
_KEY_RE = re.compile(r"(?:^|(?<=\s))([A-Za-z][\w/:.\-]*)=")


def parse_scontrol_line(line: str) -> dict[str, str]:
    """One ``scontrol -o show …`` line → ``{key: value}``.

    Values may contain spaces (``Reason=node down [root@…]``, ``OS=Linux 6.1 #1 SMP``): a value runs
    until the next ``Key=`` that follows whitespace.
    """
    matches = list(_KEY_RE.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end() : end].strip()
    return out


def _null(value: str | None) -> str:
    """Slurm's ``(null)``/``None``/``N/A`` placeholders → ``""``."""
    if value is None or value in {"(null)", "None", "N/A", "n/a"}:
        return ""
    return value


def _int(value: Any, default: int = 0) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class SlurmJob:
    """Everything the transport reads about one job, in Slurm's terms plus the mapped state."""

    job_id: str
    name: str
    slurm_state: str
    state: RunState
    exit_code: int | None
    signal: int | None
    reason: str
    restarts: int
    nodes: str
    partition: str
    stdout: str = ""
    workdir: str = ""

    def to_status(self) -> JobStatus:
        return JobStatus(
            job_id=self.job_id,
            state=self.state,
            exit_code=self.exit_code,
            signal=self.signal,
            reason=self.reason,
            restarts=self.restarts,
            nodes=self.nodes,
        )


def _final_codes(state: RunState, pair: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    """Exit codes only mean something once the job ended (a pending job reports ``0:0``)."""
    if state.is_final or state == RunState.PREEMPTED:
        return pair
    return None, None


def job_from_scontrol(fields: Mapping[str, str]) -> SlurmJob:
    """Fields of ``scontrol -o show job`` (see :func:`parse_scontrol_line`) → :class:`SlurmJob`."""
    if "JobId" not in fields or "JobState" not in fields:
        raise ValueError(f"not a scontrol job record (no JobId/JobState): {dict(fields)!r}")
    state = map_job_state(fields["JobState"])
    exit_code, sig = _final_codes(state, parse_exit_pair(fields.get("ExitCode", "0:0")))
    return SlurmJob(
        job_id=fields["JobId"],
        name=fields.get("JobName", ""),
        slurm_state=fields["JobState"],
        state=state,
        exit_code=exit_code,
        signal=sig,
        reason=_null(fields.get("Reason")),
        restarts=_int(fields.get("Restarts")),
        nodes=_null(fields.get("NodeList")),
        partition=fields.get("Partition", ""),
        stdout=_null(fields.get("StdOut")),
        workdir=_null(fields.get("WorkDir")),
    )


def job_from_squeue_json(job: Mapping[str, Any]) -> SlurmJob:
    """One element of ``squeue --json``'s ``jobs`` → :class:`SlurmJob`.

    ``exit_code`` there is a raw wait status (exit 3 → 768). ``standard_output`` is the
    unexpanded pattern (``%j`` left in), so it is not copied to ``stdout``.
    """
    slurm_state = str(job.get("job_state", ""))
    state = map_job_state(slurm_state)
    exit_code, sig = _final_codes(state, decode_wait_status(_int(job.get("exit_code"))))
    return SlurmJob(
        job_id=str(job["job_id"]),
        name=str(job.get("name", "")),
        slurm_state=slurm_state,
        state=state,
        exit_code=exit_code,
        signal=sig,
        reason=_null(str(job.get("state_reason", ""))),
        restarts=_int(job.get("restart_cnt")),
        nodes=str(job.get("nodes", "")),
        partition=str(job.get("partition", "")),
        workdir=str(job.get("current_working_directory", "")),
    )


def array_task_ids(text: str) -> list[int]:
    """squeue's ``array_task_string`` (the tasks still pending as one record: ``2-5%2``, ``1,3-4``,
    ``0-9:2``) → the task ids."""
    ids: list[int] = []
    for part in text.split("%", 1)[0].split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?(?::(\d+))?\s*", part)
        if m:
            low = int(m.group(1))
            ids.extend(range(low, int(m.group(2) or low) + 1, int(m.group(3) or 1)))
    return ids


def jobs_from_squeue_json(jobs: list[Mapping[str, Any]]) -> dict[str, SlurmJob]:
    """``squeue --json``'s ``jobs`` by job id; a job array's tasks by ``<array id>_<task id>``.

    A task that has started has a record of its own (``array_task_id``); the tasks still pending share
    one record (``array_task_string``), which stands for each of them. An array's records are not
    listed under their plain numbers: the last task to start keeps the array's own number.
    """
    out: dict[str, SlurmJob] = {}
    for record in jobs:
        job = job_from_squeue_json(record)
        array_id = _int(record.get("array_job_id"))
        if not array_id:
            out[job.job_id] = job
            continue
        task = record.get("array_task_id")
        tasks = [task] if isinstance(task, int) else array_task_ids(str(record.get("array_task_string") or ""))
        for t in tasks:
            out[f"{array_id}_{t}"] = replace(job, job_id=f"{array_id}_{t}")
    return out


SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Partition", "WorkDir")


def jobs_from_sacct(text: str) -> dict[str, SlurmJob]:
    """``sacct -P -o <SACCT_FIELDS>`` output (with header) → last record per job id.

    Job steps (``12.batch``) are skipped. A requeued job has one jobcomp record per run
    (e.g. NODE_FAIL then COMPLETED); the last one wins and the earlier ones count as restarts.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    header = lines[0].split("|")
    missing = [f for f in ("JobID", "State", "ExitCode") if f not in header]
    if missing:
        raise ValueError(f"sacct output lacks columns {missing}; header was {lines[0]!r}")
    out: dict[str, SlurmJob] = {}
    seen: dict[str, int] = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        job_id = row["JobID"]
        if not re.fullmatch(r"\d+(_\d+)?", job_id):
            continue
        state = map_job_state(row.get("State", ""))
        try:
            pair = parse_exit_pair(row.get("ExitCode", "0:0"))
        except ValueError:
            pair = (None, None)
        exit_code, sig = _final_codes(state, pair)
        seen[job_id] = seen.get(job_id, 0) + 1
        out[job_id] = SlurmJob(
            job_id=job_id,
            name=row.get("JobName", ""),
            slurm_state=row.get("State", ""),
            state=state,
            exit_code=exit_code,
            signal=sig,
            reason="",
            restarts=seen[job_id] - 1,
            nodes=_null(row.get("NodeList")),
            partition=row.get("Partition", ""),
            workdir=_null(row.get("WorkDir")),
        )
    return out


ACCOUNTING_FIELDS = ("JobID", "State", "ExitCode", "ElapsedRaw", "TotalCPU", "MaxRSS", "Account", "QOS")


def duration_seconds(text: str) -> float | None:
    """sacct's ``[D-][HH:]MM:SS[.mmm]`` (``TotalCPU``) → seconds; ``""`` → ``None``."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", text.strip())
    if not m:
        return None
    days, hours, mins = (int(g) if g else 0 for g in m.groups()[:3])
    return days * 86400 + hours * 3600 + mins * 60 + float(m.group(4))


def size_mb(text: str) -> float | None:
    """sacct's sizes (``59836K``, ``1.5G``, ``0``) → MB; ``""`` → ``None``."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", text.strip())
    if not m:
        return None
    return float(m.group(1)) * {"": 1 / 1024 / 1024, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2)]


# What sacct and slurmrestd show as a finished job's QoS until slurmdbd has resolved the record's QoS
# id: the record is not complete yet, so it is not taken (and not kept) until it is.
UNRESOLVED_QOS = "Unknown"


def accounting_from_sacct(text: str, job_id: str) -> JobAccounting | None:
    """``sacct -P -o <ACCOUNTING_FIELDS>`` for one job → its record, the largest MaxRSS of its steps
    included; ``None`` while the job has not ended in the database."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    header = lines[0].split("|")
    rows = [dict(zip(header, ln.split("|"), strict=False)) for ln in lines[1:]]
    job = next((r for r in rows if r.get("JobID") == job_id), None)
    if job is None or not map_job_state(job.get("State", "")).is_final:
        return None
    if job.get("QOS") == UNRESOLVED_QOS:
        return None  # slurmdbd is still completing the record (seen for ~2 s after the end on 22.05)
    try:
        exit_code, sig = parse_exit_pair(job.get("ExitCode", ""))
    except ValueError:
        exit_code, sig = None, None
    rss = [v for r in rows if r.get("JobID", "").startswith(f"{job_id}.") and (v := size_mb(r.get("MaxRSS", "")))
           is not None]
    elapsed = job.get("ElapsedRaw", "")
    return JobAccounting(
        job_id=job_id, state=job.get("State", "").split(" ", 1)[0], exit_code=exit_code, signal=sig,
        elapsed_s=int(elapsed) if elapsed.isdigit() else None, cpu_time_s=duration_seconds(job.get("TotalCPU", "")),
        max_rss_mb=round(max(rss), 1) if rss else None, account=job.get("Account", ""), qos=job.get("QOS", ""),
    )


# --- nodes ---------------------------------------------------------------------------------------

_GRES_RE = re.compile(r"([A-Za-z_]+)(?::[^:(,]+)?:(\d+)(?:\([^)]*\))?")


def count_gres(gres: str, name: str = "gpu") -> int:
    """Count of one GRES in Slurm's gres strings.

    Handles ``gpu:4``, ``gpu:3(IDX:0-2)``, ``gpu:a100:2(IDX:0,2),mps:100``, ``(null)`` and ``""``.
    """
    total = 0
    for m in _GRES_RE.finditer(_null(gres)):
        if m.group(1) == name:
            total += int(m.group(2))
    return total


# Base states (lower case, as sinfo --json gives them) and flags that take a node out of service.
UNAVAILABLE_STATES = frozenset({"down", "unknown", "invalid", "inval", "error", "future", "fail"})
UNAVAILABLE_FLAGS = frozenset(
    {
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "FAIL",
        "NOT_RESPONDING",
        "INVALID_REG",
        "MAINTENANCE",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWER_DOWN",
        "POWERING_UP",
        "REBOOT_ISSUED",
        "REBOOT_REQUESTED",
    }
)


@dataclass(frozen=True)
class SlurmNode:
    """One node as ``sinfo --json`` reports it."""

    name: str
    partitions: tuple[str, ...]
    state: str  # base state, lower case: idle, mixed, allocated, down, ...
    flags: tuple[str, ...]  # DRAIN, NOT_RESPONDING, ...
    cpus: int
    alloc_cpus: int
    memory_mb: int
    alloc_memory_mb: int
    gpus: int
    alloc_gpus: int
    reason: str = ""

    @property
    def available(self) -> bool:
        """Can take new work: not down/drained/failing/unresponsive."""
        return self.state not in UNAVAILABLE_STATES and not (set(self.flags) & UNAVAILABLE_FLAGS)

    @property
    def state_text(self) -> str:
        """``idle+DRAIN`` style, for display."""
        return "+".join((self.state, *self.flags))


def nodes_from_sinfo_json(doc: Mapping[str, Any]) -> list[SlurmNode]:
    """``sinfo --json`` → nodes (v0.0.38: ``nodes[]`` with ``state`` + ``state_flags``)."""
    if "nodes" not in doc:
        raise ValueError(f"sinfo --json output has no 'nodes' key; keys: {sorted(doc)}")
    nodes = []
    for n in doc["nodes"]:
        state_words = str(n.get("state", "unknown")).lower().split("+")
        flags = [f.upper() for f in state_words[1:]] + [str(f).upper() for f in n.get("state_flags", [])]
        nodes.append(
            SlurmNode(
                name=str(n["name"]),
                partitions=tuple(n.get("partitions", ())),
                state=state_words[0],
                flags=tuple(dict.fromkeys(flags)),
                cpus=_int(n.get("cpus")),
                alloc_cpus=_int(n.get("alloc_cpus")),
                memory_mb=_int(n.get("real_memory")),
                alloc_memory_mb=_int(n.get("alloc_memory")),
                gpus=count_gres(str(n.get("gres", ""))),
                alloc_gpus=count_gres(str(n.get("gres_used", ""))),
                reason=str(n.get("reason", "") or ""),
            )
        )
    return nodes


@dataclass(frozen=True)
class PartitionLimits:
    """A partition's per-job limits from ``scontrol show partition`` (``None``: UNLIMITED / not set)."""

    max_nodes: int | None = None  # MaxNodes
    max_time_min: int | None = None  # MaxTime
    max_cpus_per_node: int | None = None  # MaxCPUsPerNode
    max_mem_per_node_mb: int | None = None  # MaxMemPerNode
    max_mem_per_cpu_mb: int | None = None  # MaxMemPerCPU


@dataclass(frozen=True)
class SlurmPartition:
    """One partition from ``scontrol -o show partition``."""

    name: str
    up: bool
    default: bool
    nodes: str
    state: str
    limits: PartitionLimits = PartitionLimits()


NO_LIMITS = PartitionLimits()


def parse_slurm_minutes(text: str) -> int | None:
    """Slurm's time limit (``MaxTime``): ``UNLIMITED``/``INFINITE`` → ``None``; ``MM``, ``MM:SS``,
    ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS`` → whole minutes (seconds rounded up)."""
    text = _null(text).strip()
    if text in ("", "UNLIMITED", "INFINITE", "NONE"):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise ValueError(f"not a Slurm time limit: {text!r}")
    days, first, second, third = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        h, mins, secs = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # HH:MM:SS
        h, mins, secs = int(first), int(second), int(third)
    else:  # MM or MM:SS
        h, mins, secs = 0, int(first), int(second or 0)
    return int(days or 0) * 1440 + h * 60 + mins + (1 if secs else 0)


def _limit(value: str | None) -> int | None:
    """``MaxNodes``/``MaxCPUsPerNode``/``MaxMem*`` values: ``UNLIMITED``, ``0`` (not set) → ``None``."""
    text = _null(value).strip()
    if not text or text in ("UNLIMITED", "INFINITE"):
        return None
    digits = re.match(r"\d+", text)
    return (int(digits.group(0)) or None) if digits else None


def partition_limits(fields: Mapping[str, str]) -> PartitionLimits:
    return PartitionLimits(
        max_nodes=_limit(fields.get("MaxNodes")),
        max_time_min=parse_slurm_minutes(fields.get("MaxTime", "UNLIMITED")),
        max_cpus_per_node=_limit(fields.get("MaxCPUsPerNode")),
        max_mem_per_node_mb=_limit(fields.get("MaxMemPerNode")),
        max_mem_per_cpu_mb=_limit(fields.get("MaxMemPerCPU")),
    )


def partitions_from_scontrol(text: str) -> list[SlurmPartition]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = parse_scontrol_line(line)
        if "PartitionName" not in f:
            raise ValueError(f"not a scontrol partition record: {line!r}")
        out.append(
            SlurmPartition(
                name=f["PartitionName"],
                up=f.get("State", "") == "UP",
                default=f.get("Default", "NO") == "YES",
                nodes=_null(f.get("Nodes")),
                state=f.get("State", ""),
                limits=partition_limits(f),
            )
        )
    return out


def parse_sbatch_parsable(text: str) -> str:
    """``sbatch --parsable`` prints ``ID`` or ``ID;cluster``."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    job_id = first.split(";", 1)[0]
    if not re.fullmatch(r"\d+", job_id):
        raise ValueError(f"sbatch --parsable printed {text!r}; expected a job id like '123'")
    return job_id
