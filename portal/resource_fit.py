"""Whether the training layer's resources fit where the pipeline will run, checked in the editor.

"Valid" means runnable where it will run: the scheduler the user submits to (``settings.scheduler``).
On ``local`` that is this machine (its CPUs, memory and GPUs, as the local executor sees them); on
Slurm, the partition asked for (or any partition, when the selector chooses) and the user's
account/QoS, with the same checks the selector and submit make (:func:`schedulers.selector._fit_problem`,
:meth:`schedulers.accounting.Accounting.problems`). Every resource that does not fit is reported at
once, as a :class:`~core.errors.Problem` naming the ``training.resources`` field and how to fix it; on
``local`` the check also proposes the resources that fit this machine (*Fit to this machine*).
No Streamlit here: :mod:`portal.editor_view` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import Problem
from schedulers.accounting import Accounting
from schedulers.base import Resources
from schedulers.selector import _fit_problem as fit_problem  # the selector's own check (submit makes it)
from schedulers.utilisation import NodeUtilisation, PartitionUtilisation

RES = "training.resources"


@dataclass(frozen=True)
class ResourceCheck:
    """What the check found: ``where`` in words ("local has 2 CPUs and no GPU"), every problem, and the
    ``training.resources`` that fit (local only; ``None`` when they fit already or cannot be proposed)."""

    scheduler: str
    where: str
    problems: tuple[Problem, ...]
    fitted: dict[str, Any] | None = None

    @property
    def fits(self) -> bool:
        return not self.problems


def resources_of(training: Mapping[str, Any]) -> Resources:
    """The training layer's resources as the executors read them (one task per node, as submit does)."""
    r = training.get("resources") or {}
    mem = r.get("mem_gb")
    return Resources(nodes=int(r.get("nodes") or 1), gpus_per_node=int(r.get("gpus_per_node") or 0),
                     cpus_per_task=int(r.get("cpus_per_task") or 1), tasks_per_node=1,
                     mem_mb=int(mem * 1024) if isinstance(mem, (int, float)) else None,
                     time_limit_min=int(r.get("time_limit_min") or 60), partition=r.get("partition"),
                     account=r.get("account"), qos=r.get("qos"))


def _processes(res: Resources) -> int:
    return res.gpus_per_node if res.gpus_per_node > 0 else res.tasks_per_node


def machine_words(node: NodeUtilisation) -> str:
    """"local has 2 CPUs, 8 GB of memory and no GPU"."""
    gpus = "no GPU" if not node.gpus else f"{node.gpus} GPU{'s' if node.gpus > 1 else ''}"
    return f"local has {node.cpus} CPU{'s' if node.cpus != 1 else ''}, {node.memory_mb / 1024:.0f} GB of memory and {gpus}"


def check_local(training: Mapping[str, Any], machine: PartitionUtilisation) -> ResourceCheck:
    """The resources against this machine, every mismatch at once, and the resources that would fit."""
    node = machine.nodes[0]
    res = resources_of(training)
    where = machine_words(node)
    problems: list[Problem] = []
    if res.nodes != 1:
        problems.append(Problem(f"{RES}.nodes", "the local scheduler runs on this one machine",
                                received=str(res.nodes), expected="1",
                                fix="set Nodes to 1, or submit to a Slurm cluster"))
    if res.gpus_per_node > node.gpus:
        problems.append(Problem(f"{RES}.gpus_per_node", "this machine has no GPU" if not node.gpus else f"this machine has {node.gpus} GPU(s)",
                                received=str(res.gpus_per_node), expected=f"at most {node.gpus}",
                                fix=f"set GPUs per node to {node.gpus} (the program then trains on the CPU)"
                                if not node.gpus else f"set GPUs per node to {node.gpus} or fewer"))
    cpus = res.cpus_per_task * max(_processes(res), 1)
    if cpus > node.cpus:
        per = max(_processes(res), 1)
        problems.append(Problem(f"{RES}.cpus_per_task", f"the job needs {cpus} CPUs ({res.cpus_per_task} per task × "
                                f"{per} task(s)); this machine has {node.cpus}", received=str(res.cpus_per_task),
                                expected=f"at most {max(node.cpus // per, 1)} per task",
                                fix=f"set CPUs per task to {max(node.cpus // per, 1)} or fewer"))
    if res.mem_mb and res.mem_mb > node.memory_mb:
        problems.append(Problem(f"{RES}.mem_gb", f"this machine has {node.memory_mb / 1024:.1f} GB of memory",
                                received=f"{res.mem_mb / 1024:g} GB", expected=f"at most {node.memory_mb // 1024} GB",
                                fix="lower Memory GB, or leave it empty for the default"))
    if not problems:
        return ResourceCheck("local", where, ())
    fitted = dict(training.get("resources") or {})
    gpus = min(res.gpus_per_node, node.gpus)
    procs = max(gpus if gpus > 0 else res.tasks_per_node, 1)
    fitted.update(nodes=1, gpus_per_node=gpus, cpus_per_task=max(min(res.cpus_per_task, node.cpus // procs), 1))
    if res.mem_mb and res.mem_mb > node.memory_mb:
        fitted["mem_gb"] = None
    return ResourceCheck("local", where, tuple(problems), fitted)


def check_slurm(training: Mapping[str, Any], partitions: Mapping[str, PartitionUtilisation],
                accounting: Accounting | None) -> ResourceCheck:
    """The resources against the partition asked for (or every partition, when the selector chooses)
    and the user's account and QoS limits: the checks submit makes."""
    res = resources_of(training)

    def problems_on(name: str) -> list[str]:
        why = [fit_problem(partitions[name], res)]
        why += accounting.problems(name, res) if accounting is not None else []
        return [w for w in why if w]

    if res.partition:
        where = f"Slurm partition {res.partition}"
        if res.partition not in partitions:
            return ResourceCheck("slurm", where, (Problem(
                f"{RES}.partition", "this cluster has no such partition", received=res.partition,
                expected=", ".join(sorted(partitions)) or "a partition of this cluster",
                fix="choose one of the cluster's partitions, or leave Partition empty to let FlowTrain choose"),))
        return ResourceCheck("slurm", where, tuple(
            Problem(f"{RES}", why, fix="change the training layer's resources (or account/QoS) to fit")
            for why in problems_on(res.partition)))
    where = f"Slurm ({len(partitions)} partition(s))"
    by_partition = {name: problems_on(name) for name in sorted(partitions)}
    if not partitions or any(not why for why in by_partition.values()):
        return ResourceCheck("slurm", where, ())  # some partition can run it: the selector picks one
    return ResourceCheck("slurm", where, tuple(
        Problem(f"{RES}", f"partition {name}: {why}", fix="change the training layer's resources to fit a partition")
        for name, whys in by_partition.items() for why in whys))
