"""How busy each partition is: total / allocated / idle CPUs, GPUs and memory, pending jobs.

Nodes that are down, drained (or draining), failing, unresponsive or invalid are not counted as
idle capacity: a job cannot start there. They still count in the totals and are listed with their
state so the portal can say why capacity is missing.

For the selector's time-to-result estimate (docs/selector.md) each node also carries what kind of
machine it is (:attr:`NodeUtilisation.hardware`: architecture, CPUs, memory, GRES, Slurm features) and
until when its running jobs hold it (their end time: start + time limit), from which
:meth:`PartitionUtilisation.expected_wait_s` estimates when a request could start.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psutil

from schedulers.base import RunState
from schedulers.contention import Contention, here
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.parsing import (
    NO_LIMITS,
    PartitionLimits,
    SlurmNode,
    SlurmPartition,
    job_from_squeue_json,
    nodes_from_sinfo_json,
)

NVIDIA_SMI_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class NodeUtilisation:
    name: str
    state: str  # e.g. "idle", "mixed", "idle+DRAIN", "down"
    available: bool
    cpus: int
    alloc_cpus: int
    gpus: int
    alloc_gpus: int
    memory_mb: int
    alloc_memory_mb: int
    reason: str = ""
    hardware: str = ""  # what kind of machine: "x86_64 8 CPUs 16000 MB gpu:4 [features]"
    busy_until: float | None = None  # when the last running job on it reaches its end time (None: unknown)

    @property
    def idle_cpus(self) -> int:
        return max(self.cpus - self.alloc_cpus, 0) if self.available else 0

    @property
    def idle_gpus(self) -> int:
        return max(self.gpus - self.alloc_gpus, 0) if self.available else 0

    @property
    def idle_memory_mb(self) -> int:
        return max(self.memory_mb - self.alloc_memory_mb, 0) if self.available else 0


@dataclass(frozen=True)
class PartitionUtilisation:
    """One partition (or the local machine, ``name="local"``)."""

    name: str
    up: bool
    default: bool
    total_cpus: int
    alloc_cpus: int
    idle_cpus: int
    total_gpus: int
    alloc_gpus: int
    idle_gpus: int
    total_memory_mb: int
    alloc_memory_mb: int
    idle_memory_mb: int
    pending_jobs: int
    running_jobs: int
    nodes: tuple[NodeUtilisation, ...]
    limits: PartitionLimits = NO_LIMITS  # MaxNodes, MaxTime, … of ``scontrol show partition``
    observed_at: float = 0.0  # when this was read (time.time()); waits are counted from it
    # The machine's CPU contention now (the local machine's runnable tasks; schedulers/contention.py): None on Slurm,
    # whose jobs' CPUs are their own
    contention: Contention | None = None

    @property
    def hardware(self) -> str:
        """The kinds of machine in the partition ("; "-joined, sorted): two partitions of the same
        nodes share calibration measurements."""
        return "; ".join(sorted({n.hardware for n in self.nodes if n.available and n.hardware}))

    def expected_wait_s(self, nodes: int = 1, gpus: int = 0, cpus: int = 1, memory_mb: int = 0) -> float | None:
        """Seconds until ``nodes`` nodes could start a ``gpus``/``cpus``/``memory_mb``-per-node task: 0 when
        it can start now, else when enough big-enough nodes are released by the jobs running on them
        (their end times, i.e. time limits: an upper bound, jobs often end sooner). Jobs queued ahead
        are not modelled (their count breaks ties). ``None``: unknown (a busy node's end time is not known)."""
        if self.can_start_now(nodes, gpus, cpus, memory_mb):
            return 0.0
        ready: list[float] = []
        for n in self.nodes:
            if not n.available or n.gpus < gpus or n.cpus < cpus or n.memory_mb < memory_mb:
                continue
            if n.idle_gpus >= gpus and n.idle_cpus >= cpus and n.idle_memory_mb >= memory_mb:
                ready.append(0.0)
            elif n.busy_until is not None:
                ready.append(max(n.busy_until - self.observed_at, 0.0))
        if len(ready) < nodes or not self.up:
            return None
        return sorted(ready)[nodes - 1]

    @property
    def available_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.available)

    @property
    def unavailable_nodes(self) -> tuple[NodeUtilisation, ...]:
        return tuple(n for n in self.nodes if not n.available)

    def nodes_that_fit(self, gpus: int = 0, cpus: int = 1, memory_mb: int = 0) -> int:
        """How many nodes could start a ``gpus``/``cpus``/``memory_mb``-per-node task right now."""
        if not self.up:
            return 0
        return sum(
            1 for n in self.nodes if n.idle_gpus >= gpus and n.idle_cpus >= cpus and n.idle_memory_mb >= memory_mb
        )

    def can_start_now(self, nodes: int = 1, gpus: int = 0, cpus: int = 1, memory_mb: int = 0) -> bool:
        return self.nodes_that_fit(gpus, cpus, memory_mb) >= nodes


def _node_util(n: SlurmNode, hardware: str = "", busy_until: float | None = None) -> NodeUtilisation:
    return NodeUtilisation(
        name=n.name,
        state=n.state_text,
        available=n.available,
        cpus=n.cpus,
        alloc_cpus=n.alloc_cpus,
        gpus=n.gpus,
        alloc_gpus=n.alloc_gpus,
        memory_mb=n.memory_mb,
        alloc_memory_mb=n.alloc_memory_mb,
        reason=n.reason,
        hardware=hardware,
        busy_until=busy_until,
    )


def _hardware(raw: Mapping[str, Any]) -> str:
    """A node's kind from its ``sinfo --json`` record: architecture, CPUs, memory, GRES, features."""
    features = str(raw.get("active_features") or raw.get("features") or "").strip()
    words = [str(raw.get("architecture") or "?"), f"{raw.get('cpus', '?')} CPUs", f"{raw.get('real_memory', '?')} MB",
             str(raw.get("gres") or "no GRES")]
    return " ".join(words) + (f" [{features}]" if features else "")


def _busy_until(squeue_doc: Mapping[str, Any]) -> dict[str, float]:
    """Node name → the latest end time (start + time limit) of the jobs running on it."""
    until: dict[str, float] = {}
    for raw in squeue_doc.get("jobs", []):
        if str(raw.get("job_state", "")).split(",")[0].upper() != "RUNNING":
            continue
        end = raw.get("end_time")
        end = end.get("number") if isinstance(end, Mapping) else end
        allocated = (raw.get("job_resources") or {}).get("allocated_nodes") or []
        if not isinstance(end, (int, float)) or end <= 0:
            continue
        for node in allocated:
            name = str(node.get("nodename", ""))
            if name:
                until[name] = max(until.get(name, 0.0), float(end))
    return until


def _summarise(
    name: str,
    nodes: Sequence[NodeUtilisation],
    *,
    up: bool,
    default: bool,
    pending: int,
    running: int,
    limits: PartitionLimits = NO_LIMITS,
    observed_at: float | None = None,
) -> PartitionUtilisation:
    return PartitionUtilisation(
        name=name,
        up=up,
        default=default,
        total_cpus=sum(n.cpus for n in nodes),
        alloc_cpus=sum(n.alloc_cpus for n in nodes),
        idle_cpus=sum(n.idle_cpus for n in nodes) if up else 0,
        total_gpus=sum(n.gpus for n in nodes),
        alloc_gpus=sum(n.alloc_gpus for n in nodes),
        idle_gpus=sum(n.idle_gpus for n in nodes) if up else 0,
        total_memory_mb=sum(n.memory_mb for n in nodes),
        alloc_memory_mb=sum(n.alloc_memory_mb for n in nodes),
        idle_memory_mb=sum(n.idle_memory_mb for n in nodes) if up else 0,
        pending_jobs=pending,
        running_jobs=running,
        nodes=tuple(nodes),
        limits=limits,
        observed_at=time.time() if observed_at is None else observed_at,
    )


def utilisation_from_outputs(
    sinfo_doc: Mapping[str, Any],
    squeue_doc: Mapping[str, Any],
    partitions: Iterable[SlurmPartition] = (),
    now: float | None = None,
) -> dict[str, PartitionUtilisation]:
    """Pure function over ``sinfo --json``, ``squeue --json`` and ``scontrol show partition``
    (``now``: when they were read, default the current time).

    Partitions come from the nodes' ``partitions`` lists (sinfo --json in 22.05 has no partition
    list); ``partitions`` adds up/down state, the default flag, and partitions without nodes.
    """
    observed = time.time() if now is None else now
    raw_nodes = {str(n.get("name", "")): n for n in sinfo_doc.get("nodes", [])}
    busy = _busy_until(squeue_doc)
    by_part: dict[str, list[NodeUtilisation]] = {}
    for node in nodes_from_sinfo_json(sinfo_doc):
        util = _node_util(node, _hardware(raw_nodes.get(node.name, {})), busy.get(node.name))
        for part in node.partitions:
            by_part.setdefault(part, []).append(util)
    meta = {p.name: p for p in partitions}
    for name in meta:
        by_part.setdefault(name, [])
    pending: dict[str, int] = {}
    running: dict[str, int] = {}
    for raw in squeue_doc.get("jobs", []):
        job = job_from_squeue_json(raw)
        # A job submitted to "cpu,gpu" waits in both.
        for part in filter(None, job.partition.split(",")):
            if job.state == RunState.PENDING:
                pending[part] = pending.get(part, 0) + 1
            elif job.state == RunState.RUNNING:
                running[part] = running.get(part, 0) + 1
    return {
        name: _summarise(
            name,
            nodes,
            up=meta[name].up if name in meta else True,
            default=meta[name].default if name in meta else False,
            pending=pending.get(name, 0),
            running=running.get(name, 0),
            limits=meta[name].limits if name in meta else NO_LIMITS,
            observed_at=observed,
        )
        for name, nodes in sorted(by_part.items())
    }


def slurm_utilisation(commands: SlurmCommands | None = None) -> dict[str, PartitionUtilisation]:
    """Per-partition utilisation of the cluster at ``$SLURM_CONF`` (three client calls, ~100 ms)."""
    cmds = commands or SlurmCommands.from_env()
    return utilisation_from_outputs(cmds.sinfo_json(), cmds.squeue_json(), cmds.partitions())


def _nvidia_gpus(timeout_s: float = NVIDIA_SMI_TIMEOUT_S) -> int:
    """GPUs nvidia-smi lists (0 without nvidia-smi, or when it fails or hangs: no GPU usable)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        return 0
    if proc.returncode != 0:
        return 0
    return sum(1 for line in proc.stdout.splitlines() if line.strip())


def local_utilisation(
    *,
    alloc_cpus: int = 0,
    alloc_gpus: int = 0,
    alloc_memory_mb: int = 0,
    pending_jobs: int = 0,
    running_jobs: int = 0,
    gpus: int | None = None,
    busy_until: float | None = None,
) -> PartitionUtilisation:
    """The portal's own machine as one partition named ``local``.

    CPUs from ``os.cpu_count``, memory from psutil, GPUs from ``nvidia-smi`` (or ``gpus``). What the
    local executor has running is passed in by it (``alloc_*``, ``*_jobs``): this machine's load from
    other programs is not an allocation; it is its :attr:`~PartitionUtilisation.contention` (its runnable
    tasks now: :func:`schedulers.contention.here`), by which an estimate scales a calibration measured under another load.
    """
    cpus = os.cpu_count() or 1
    mem = psutil.virtual_memory()
    total_mb = int(mem.total // (1024 * 1024))
    n_gpus = _nvidia_gpus() if gpus is None else gpus
    node = NodeUtilisation(
        name="localhost",
        state="mixed" if alloc_cpus or alloc_gpus else "idle",
        available=True,
        cpus=cpus,
        alloc_cpus=min(alloc_cpus, cpus),
        gpus=n_gpus,
        alloc_gpus=min(alloc_gpus, n_gpus),
        memory_mb=total_mb,
        alloc_memory_mb=min(alloc_memory_mb, total_mb),
        hardware=local_hardware(cpus, total_mb, n_gpus),
        busy_until=busy_until,
    )
    return replace(_summarise("local", [node], up=True, default=True, pending=pending_jobs, running=running_jobs),
                   contention=here())


def local_hardware(cpus: int, memory_mb: int, gpus: int) -> str:
    """This machine's kind: architecture, CPU model, CPUs, memory (rounded to GB), GPUs."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:
        pass
    gpu_words = f" {gpus} GPUs" if gpus else ""
    return f"{platform.machine()} {model} {cpus} CPUs {round(memory_mb / 1024)} GB{gpu_words}".replace("  ", " ")
