"""The target-framework determination: which framework, on which partition, and why.

Every (framework, partition) pair is a :class:`Candidate`. The policy, in order:

1. **Feasible** — the framework is installed in an environment that reaches the partition, it can
   express every op of the graph (``core.mapping.base.unsupported_problems``), the request is within
   the partition's limits (MaxNodes, MaxTime, MaxCPUsPerNode, MaxMemPerNode/MaxMemPerCPU; the reason
   names the limit), and the partition has enough nodes with enough GPUs/CPUs/memory *in total*
   (down and drained nodes excluded).
2. **Soonest finish** — the estimated time to result: the expected start (0 when enough GPUs/CPUs
   are idle on enough nodes now, else when the running jobs' time limits release them:
   :meth:`~schedulers.utilisation.PartitionUtilisation.expected_wait_s`; :data:`UNKNOWN_WAIT_S` when
   not known) + the program's start-up + epochs x training samples / samples per second. The speed is
   the one measured by a calibration job of this graph on the partition's kind of nodes, or the MACs
   model until one exists (:mod:`schedulers.speed`, docs/selector.md). Then fewer pending jobs, then
   a CUDA build when GPUs are requested.
3. **The user's preference** — ``spec.training.framework`` unless ``auto`` (or ``preferred``), among
   choices that finish equally soon (e.g. all from the same MACs model).

Then a fixed order (torch, keras, paddle) and more idle capacity break ties, so the choice is
deterministic. The reasons come back in words (one line per candidate) and as data.

``require`` (the CLI's/portal's explicit ``--framework X``) is a constraint, not a preference:
only X's candidates can win. ``spec.training.resources.partition`` likewise restricts partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core.errors import FlowTrainError, Problem
from core.frameworks import FRAMEWORKS
from core.spec import PipelineSpec
from core.validate import Analysis, validate
from schedulers.accounting import Accounting
from schedulers.base import Resources
from schedulers.discovery import EnvironmentReport, FrameworkInfo
from schedulers.estimate import Estimate, estimate, range_words, short_duration
from schedulers.speed import Speed, SpeedBook, planned_train_samples, speed_key
from schedulers.utilisation import PartitionUtilisation

LOCAL_PARTITION = "local"
UNKNOWN_WAIT_S = 3600.0  # a start time the utilisation cannot tell (no end time of the jobs in the way)
ASSUMED_TRAIN_SAMPLES = 10_000  # when neither the spec nor a measurement says how many samples an epoch has
SupportCheck = Callable[[Analysis, str], list[Problem]]


class NoFeasibleTarget(FlowTrainError):
    """No framework/partition can run the pipeline; the message lists why for each candidate."""

    exit_code = 4


def resources_from_spec(spec: PipelineSpec) -> Resources:
    r = spec.training.resources
    return Resources(
        nodes=r.nodes,
        gpus_per_node=r.gpus_per_node,
        cpus_per_task=r.cpus_per_task,
        tasks_per_node=1,
        mem_mb=int(r.mem_gb * 1024) if r.mem_gb is not None else None,
        time_limit_min=r.time_limit_min,
        partition=r.partition,
        account=r.account,
        qos=r.qos,
    )


@dataclass(frozen=True)
class Candidate:
    framework: str
    partition: str
    environment: str | None  # name of the environment that would run it
    python: str | None
    installed: bool
    version: str | None
    build: str  # "CPU", "CUDA 12.4" or "-"
    supported: bool  # every op can be expressed
    unsupported: tuple[str, ...]  # "node conv1: …" lines
    fits: bool  # the partition could ever run the request
    fit_problem: str
    can_start_now: bool
    idle_gpus: int
    idle_cpus: int
    default_partition: bool
    total_gpus: int
    total_cpus: int
    pending_jobs: int
    gpu_build_ok: bool  # a CUDA build, or no GPUs requested
    preferred: bool
    allowed: bool = True  # not excluded by --framework / a requested partition
    rank: int | None = None  # 1 = chosen; None = infeasible
    reason: str = ""
    module: str | None = None  # the Lmod module the environment loads
    modulepath: tuple[str, ...] = ()
    samples_per_s: float | None = None  # training speed (measured or from the MACs model)
    speed_source: str = ""  # "measured" | "model" | "" (no estimate: not installed / cannot fit)
    speed_note: str = ""  # how the model's rate was found, or why a measurement was not used
    measured_at: float | None = None
    wait_s: float | None = None  # expected wait before the job starts (None: unknown)
    train_s: float | None = None  # the run once started: the parts of `estimate` less the wait
    finish_s: float | None = None  # wait (UNKNOWN_WAIT_S when unknown) + train_s: the ranking's time to result
    low_s: float | None = None  # finish_s at the low and high end of the estimate's uncertainty
    high_s: float | None = None
    estimate: dict[str, Any] | None = None  # schedulers.estimate.Estimate: the parts, their sources, the counts
    speed_key: str = ""  # the speed cache's key of this candidate (a completed run teaches the cache under it)
    hardware: str = ""  # the partition's kind of nodes (measurements are shared by partitions of one kind)

    @property
    def feasible(self) -> bool:
        return self.allowed and self.installed and self.supported and self.fits

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "feasible": self.feasible}


@dataclass(frozen=True)
class Selection:
    framework: str | None
    partition: str | None
    environment: str | None
    python: str | None
    reasons: list[str]
    candidates: list[Candidate]
    resources: Resources = field(default_factory=Resources)
    module: str | None = None  # the chosen environment's Lmod module, loaded by job.sbatch
    modulepath: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.framework is not None

    def require(self) -> Selection:
        """This selection, or :class:`NoFeasibleTarget` listing why nothing fits."""
        if not self.ok:
            raise NoFeasibleTarget("\n".join(self.reasons))
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "partition": self.partition,
            "environment": self.environment,
            "python": self.python,
            "reasons": list(self.reasons),
            "resources": asdict(self.resources),
            "module": self.module,
            "modulepath": list(self.modulepath),
            "candidates": [c.to_dict() for c in self.candidates],
        }


def _default_support(analysis: Analysis, framework: str) -> list[Problem]:
    from core.mapping.base import unsupported_problems

    return unsupported_problems(analysis, framework)


def _per_node(res: Resources) -> tuple[int, int, int]:
    procs = res.gpus_per_node if res.gpus_per_node > 0 else res.tasks_per_node
    return res.gpus_per_node, res.cpus_per_task * max(procs, 1), res.mem_mb or 0


def _hhmm(minutes: int) -> str:
    days, rest = divmod(minutes, 1440)
    return (f"{days}-" if days else "") + f"{rest // 60}:{rest % 60:02d}:00"


def _limit_problem(util: PartitionUtilisation, res: Resources) -> str:
    """The partition's own per-job limit the request exceeds, named ("" when none): Slurm would
    refuse or hold the job forever, so it is refused here with the limit in the reason."""
    lim = util.limits
    _, cpus, mem = _per_node(res)
    name = util.name
    if lim.max_nodes is not None and res.nodes > lim.max_nodes:
        return (f"the job asks for {res.nodes} nodes; partition {name} allows at most {lim.max_nodes} per job "
                f"(MaxNodes={lim.max_nodes}); lower training.resources.nodes")
    if lim.max_time_min is not None and res.time_limit_min > lim.max_time_min:
        return (f"the job asks for {_hhmm(res.time_limit_min)}; partition {name} allows at most "
                f"{_hhmm(lim.max_time_min)} (MaxTime); lower training.resources.time_limit_min to "
                f"{lim.max_time_min} or less")
    if lim.max_cpus_per_node is not None and cpus > lim.max_cpus_per_node:
        return (f"the job asks for {cpus} CPUs per node; partition {name} allows at most {lim.max_cpus_per_node} "
                f"(MaxCPUsPerNode); lower training.resources.cpus_per_task")
    if mem and lim.max_mem_per_node_mb is not None and mem > lim.max_mem_per_node_mb:
        return (f"the job asks for {mem} MB per node; partition {name} allows at most {lim.max_mem_per_node_mb} MB "
                f"(MaxMemPerNode); lower training.resources.mem_gb")
    if mem and lim.max_mem_per_cpu_mb is not None and mem > lim.max_mem_per_cpu_mb * cpus:
        return (f"the job asks for {mem} MB per node for {cpus} CPU(s); partition {name} allows at most "
                f"{lim.max_mem_per_cpu_mb} MB per CPU (MaxMemPerCPU); lower training.resources.mem_gb")
    return ""


def _fit_problem(util: PartitionUtilisation, res: Resources) -> str:
    """Why the partition can never run the request ("" when it can, given time)."""
    gpus, cpus, mem = _per_node(res)
    if not util.up:
        return f"partition {util.name} is down"
    limit = _limit_problem(util, res)
    if limit:
        return limit
    usable = [n for n in util.nodes if n.available]
    big = [n for n in usable if n.gpus >= gpus and n.cpus >= cpus and n.memory_mb >= mem]
    if len(big) >= res.nodes:
        return ""
    off = [f"{n.name} {n.state}" for n in util.nodes if not n.available]
    off_text = f" ({', '.join(off)})" if off else ""
    if gpus and not any(n.gpus >= gpus for n in usable):
        most = max((n.gpus for n in usable), default=0)
        return f"no usable node of partition {util.name} has {gpus} GPUs (at most {most}){off_text}"
    if not any(n.cpus >= cpus for n in usable):
        most = max((n.cpus for n in usable), default=0)
        return f"no usable node of partition {util.name} has {cpus} CPUs (at most {most}){off_text}"
    if mem and not any(n.memory_mb >= mem for n in usable):
        return f"no usable node of partition {util.name} has {mem} MB of memory{off_text}"
    return (f"needs {res.nodes} node(s) with {gpus} GPUs/{cpus} CPUs each; partition {util.name} has "
            f"{len(big)} usable{off_text}")


def _best_env(
    framework: str, partition: str, reports: Sequence[EnvironmentReport], scheduler: str, want_cuda: bool
) -> tuple[EnvironmentReport, FrameworkInfo] | None:
    found = []
    for rep in reports:
        env = rep.environment
        reaches = env.local if scheduler == "local" else env.serves_partition(partition)
        if reaches and rep.has(framework):
            found.append((rep, rep.frameworks[framework]))
    if not found:
        return None
    if want_cuda:
        found.sort(key=lambda ri: not ri[1].cuda)  # stable: configuration order otherwise
    return found[0]


def _words(c: Candidate, res: Resources) -> str:
    head = f"{c.framework} on {c.partition}"
    if not c.allowed:
        return f"{head}: excluded ({c.fit_problem})"
    if not c.installed:
        return f"{head}: not installed in any environment that reaches {c.partition}"
    what = f"{c.framework} {c.version or ''} ({c.build} build)".replace("  ", " ")
    if c.module:
        what += f" from module {c.module}"
    if not c.supported:
        shown = ", ".join(c.unsupported[:4]) + (f", … {len(c.unsupported) - 4} more" if len(c.unsupported) > 4 else "")
        return f"{head}: {what} cannot express {len(c.unsupported)} node(s): {shown}"
    if not c.fits:
        return f"{head}: {what}, but {c.fit_problem}"
    gpus, cpus, _ = _per_node(res)
    load = (f"{c.idle_gpus} of {c.total_gpus} GPUs idle, " if gpus or c.total_gpus else "") + \
        f"{c.idle_cpus} of {c.total_cpus} CPUs idle, {c.pending_jobs} pending job(s)"
    start = "can start now" if c.can_start_now else f"would wait (needs {gpus} GPUs/{cpus} CPUs on {res.nodes} node(s))"
    extra = []
    if not c.gpu_build_ok:
        extra.append("a CPU build: the requested GPUs would sit idle")
    if c.preferred:
        extra.append("your preferred framework")
    return f"{head}: {what}, {start}; {load}; {_speed_words(c)}" + (f"; {', '.join(extra)}" if extra else "")


def duration_words(seconds: float) -> str:
    """``~45 s``, ``~4 min``, ``~2.5 h``, ``~3 days``."""
    return "~" + short_duration(seconds)


def _speed_words(c: Candidate, short: bool = False) -> str:
    """``2,130 samples/s measured, done in ~4 min, could be 3–5 min (start-up 20 s, training 3 min, …)``
    (or ``… from the MACs model``); short: ``1,760, ~5 min (4–6 min)``."""
    if c.samples_per_s is None or c.finish_s is None:
        return "no speed estimate"
    rate = f"{c.samples_per_s:,.0f}" if c.samples_per_s >= 10 else f"{c.samples_per_s:.2g}"
    how = "measured" if c.speed_source == "measured" else "from the MACs model"
    spread = f", {range_words(c.low_s, c.high_s)}" if c.low_s is not None and c.high_s is not None else ""
    if short:
        return (f"{rate}{' (model)' if c.speed_source != 'measured' else ''}, {duration_words(c.finish_s)}"
                + (f" ({spread[2:].removeprefix('could be ')})" if spread else ""))
    note = f" [{c.speed_note}]" if c.speed_note and c.speed_source != "measured" else ""
    return f"{rate} samples/s {how}, done in {duration_words(c.finish_s)}{spread} ({parts_words(c)}){note}"


def parts_words(c: Candidate) -> str:
    """``start-up 6 s, training 4 s, validation 1 s, checkpoints and end 1 s, wait 0 s``, and where the load
    scaled the measurement, ``; load 3.1 now vs 0.4 at calibration (2 CPUs): start-up, training and validation ×2.1``."""
    e = c.estimate or {}
    wait = ("unknown, counted as " + duration_words(UNKNOWN_WAIT_S)) if c.wait_s is None \
        else "none" if c.wait_s == 0 else short_duration(c.wait_s)
    parts = [("start-up", e.get("startup_s")), ("training", e.get("train_s")), ("validation", e.get("val_s")),
             ("checkpoints and end", (e.get("checkpoint_s") or 0) + (e.get("end_s") or 0) if e else None)]
    load = (e.get("load") or {}).get("words")
    return ", ".join(f"{name} {short_duration(v)}" for name, v in parts if v is not None) + f", wait {wait}" \
        + (f"; {load}" if load else "")


def overlaps(a: Candidate, b: Candidate) -> bool:
    """Whether two candidates' time-to-result ranges overlap: which finishes first is not known."""
    if None in (a.low_s, a.high_s, b.low_s, b.high_s):
        return False
    return a.low_s <= b.high_s and b.low_s <= a.high_s  # type: ignore[operator]


def comparison_line(ranked: Sequence[Candidate]) -> str:
    """Each framework's best feasible choice, its speed and time to result, in rank order:
    ``time to result: keras on cpu: 2,130 samples/s measured, done in ~4 min; torch on cpu: 1,760, ~5 min``."""
    firsts: dict[str, Candidate] = {}
    for c in ranked:
        if c.rank is not None:
            firsts.setdefault(c.framework, c)  # each framework's best choice
    parts = [f"{c.framework} on {c.partition}: " + _speed_words(c, short=i > 0).split(" [")[0]
             for i, c in enumerate(firsts.values())]
    return "time to result: " + "; ".join(parts)


def select(
    spec: PipelineSpec,
    analysis: Analysis | None,
    reports: Sequence[EnvironmentReport],
    utilisation: Mapping[str, PartitionUtilisation],
    preferred: str | None = None,
    *,
    scheduler: str = "slurm",
    require: str | None = None,
    support: SupportCheck | None = None,
    accounting: Accounting | None = None,
    speeds: SpeedBook | None = None,
) -> Selection:
    """Choose framework and partition for ``spec`` (see the module docstring for the policy).

    ``reports``: :func:`schedulers.discovery.discover`'s result. ``utilisation``: partition name →
    :class:`PartitionUtilisation` (for ``scheduler="local"``: ``{"local": …}``). ``preferred``:
    defaults to ``spec.training.framework`` unless ``auto``. ``require``: only this framework may
    be chosen. ``support``: ``(analysis, framework) -> problems`` (tests inject one). ``accounting``:
    the submitting user's associations and QoS (:mod:`schedulers.accounting`); a partition where the
    cluster would refuse the request's account, QoS or size is infeasible, with the limit named.
    ``speeds``: cached measurements and the MACs model (:class:`schedulers.speed.SpeedBook`; default:
    the MACs model's default rates only).
    """
    if analysis is None:
        analysis = validate(spec)
    if require is not None and require not in FRAMEWORKS:
        raise NoFeasibleTarget(f"framework {require!r} is unknown; choose one of {', '.join(FRAMEWORKS)} or auto")
    if preferred is None and spec.training.framework != "auto":
        preferred = spec.training.framework
    res = resources_from_spec(spec)
    gpus, cpus, mem = _per_node(res)
    want_partition = spec.training.resources.partition if scheduler != "local" else None
    check = support or _default_support
    unsupported = {fw: [_short(p) for p in check(analysis, fw)] for fw in FRAMEWORKS}
    book = speeds or SpeedBook(cache=None)

    candidates: list[Candidate] = []
    for part_name in sorted(utilisation):
        util = utilisation[part_name]
        problem = _fit_problem(util, res)
        if accounting is not None:
            problem = "; ".join(p for p in (problem, *accounting.problems(part_name, res)) if p)
        for fw in FRAMEWORKS:
            best = _best_env(fw, part_name, reports, scheduler, want_cuda=gpus > 0)
            info = best[1] if best else None
            excluded = ""
            if require is not None and fw != require:
                excluded = f"--framework {require} was requested"
            elif want_partition is not None and part_name != want_partition:
                excluded = f"training.resources.partition is {want_partition}"
            candidates.append(Candidate(
                framework=fw, partition=part_name,
                environment=best[0].environment.name if best else None,
                python=best[0].environment.python if best else None,
                installed=info is not None, version=info.version if info else None,
                build=info.build if info else "-",
                supported=not unsupported[fw], unsupported=tuple(unsupported[fw]),
                fits=not problem, fit_problem=excluded or problem,
                can_start_now=not problem and util.can_start_now(res.nodes, gpus, cpus, mem),
                idle_gpus=util.idle_gpus, idle_cpus=util.idle_cpus, total_gpus=util.total_gpus,
                total_cpus=util.total_cpus, pending_jobs=util.pending_jobs, default_partition=util.default,
                gpu_build_ok=gpus == 0 or bool(info and info.cuda),
                preferred=fw == preferred, allowed=not excluded,
                module=best[0].environment.module if best else None,
                modulepath=best[0].environment.modulepath if best else (),
                **(_estimate(spec, analysis, book, best, util, res) if best and not problem else {}),
            ))

    order = {fw: i for i, fw in enumerate(FRAMEWORKS)}

    def key(c: Candidate) -> tuple[Any, ...]:
        # Ties: GPU jobs go where most GPUs are idle; CPU jobs to the default partition, then where
        # most CPUs are idle (they should not take GPU nodes needlessly).
        spare = (-c.idle_gpus, -c.idle_cpus) if gpus else (not c.default_partition, -c.idle_cpus)
        return (c.finish_s if c.finish_s is not None else float("inf"), c.pending_jobs, not c.gpu_build_ok,
                not c.preferred, order[c.framework], *spare, c.partition)

    feasible = sorted((c for c in candidates if c.feasible), key=key)
    if preferred and feasible and feasible[0].framework != preferred:
        # within the uncertainty of the soonest run, the spec's preference decides; not against a sooner
        # start, a shorter queue or a CUDA build (those are known, not estimated)
        # Nothing measured on these nodes (both from shipped defaults, another machine's figures): the
        # preference decides too, however far apart those figures are.
        first = feasible[0]
        tied = [c for c in feasible if c.framework == preferred
                and (overlaps(c, first) or (shipped_estimate(c) and shipped_estimate(first)))
                and (c.wait_s if c.wait_s is not None else UNKNOWN_WAIT_S)
                <= (first.wait_s if first.wait_s is not None else UNKNOWN_WAIT_S)
                and c.pending_jobs <= first.pending_jobs and c.gpu_build_ok >= first.gpu_build_ok]
        if tied:
            feasible.remove(tied[0])
            feasible.insert(0, tied[0])
    if feasible and feasible[0].framework != preferred and shipped_estimate(feasible[0]):
        # nothing measured on these nodes: figures from a development machine do not tell apart frameworks
        # within each other's uncertainty; the fixed order does, as it did before those figures existed
        first = feasible[0]
        tied = [c for c in feasible if shipped_estimate(c) and overlaps(c, first) and c.wait_s == first.wait_s
                and c.pending_jobs == first.pending_jobs and c.gpu_build_ok == first.gpu_build_ok]
        pick = min(tied, key=lambda c: order[c.framework])
        feasible.remove(pick)
        feasible.insert(0, pick)
    ranks = {(c.framework, c.partition): i + 1 for i, c in enumerate(feasible)}
    ranked = []
    for c in candidates:
        c = _with(c, rank=ranks.get((c.framework, c.partition)))
        ranked.append(_with(c, reason=_words(c, res)))
    ranked.sort(key=lambda c: (c.rank is None, c.rank or 0, order[c.framework], c.partition))

    if not feasible:
        if not utilisation:
            lines = ["no partition to run on: the scheduler reported none"]
        else:
            lines = ["no framework can run this pipeline on the available resources:"]
        lines += [f"  - {c.reason}" for c in ranked if c.allowed]
        return Selection(None, None, None, None, lines, ranked, res)

    best = ranked[0]
    lines = [_headline(best, ranked, preferred, res), comparison_line(ranked)]
    lines += [f"  - {c.reason}" for c in ranked]
    return Selection(best.framework, best.partition, best.environment, best.python, lines, ranked, res,
                     module=best.module, modulepath=best.modulepath)


def _estimate(spec: PipelineSpec, analysis: Analysis, book: SpeedBook,
              best: tuple[EnvironmentReport, FrameworkInfo], util: PartitionUtilisation,
              res: Resources) -> dict[str, Any]:
    """The candidate's speed, expected wait and time to result (Candidate fields)."""
    report, info = best
    env = report.environment
    gpus, cpus, mem = _per_node(res)
    speed: Speed = book.speed(spec, analysis, info.name, info.version, env.name, env.python, env.module,
                              util.hardware, res, info.cuda)
    samples = spec.training.samples_per_epoch or speed.train_samples or planned_train_samples(spec) \
        or ASSUMED_TRAIN_SAMPLES
    wait = util.expected_wait_s(res.nodes, gpus, cpus, mem)
    whole: Estimate = estimate(spec, analysis, info.name, speed, samples, _total_samples(spec), wait,
                               world=res.nodes * max(res.gpus_per_node, 1),
                               contention=util.contention if not gpus else None)  # a GPU's steps are not the CPUs'
    counted_wait = UNKNOWN_WAIT_S if wait is None else wait
    key = speed_key(spec, analysis, info.name, env.name, env.python, env.module, util.hardware, res)
    return {"samples_per_s": speed.samples_per_s, "speed_source": speed.source, "speed_note": speed.note,
            "measured_at": speed.measured_at, "wait_s": wait, "train_s": whole.run_s,
            "finish_s": counted_wait + whole.run_s, "low_s": counted_wait + whole.low_s,
            "high_s": counted_wait + whole.high_s, "estimate": whole.to_dict(), "speed_key": key,
            "hardware": util.hardware}


def _total_samples(spec: PipelineSpec) -> int | None:
    from core.datasets import builtin

    known = builtin(spec.data.source)
    return spec.data.size or (known.size if known is not None else None)


def _short(problem: Problem) -> str:
    """``conv1 (Conv2d): no converter`` — the node, its op and the framework's reason."""
    reason = problem.message.split(": ", 1)[-1]
    return f"{problem.node or problem.location} ({problem.received or '?'}: {reason})"


def _with(c: Candidate, **changes: Any) -> Candidate:
    return Candidate(**{**asdict(c), **changes})


def shipped_estimate(c: Candidate) -> bool:
    """The candidate's speed is its framework's shipped defaults (:mod:`schedulers.shipped`): nothing measured
    on these nodes."""
    return c.speed_source == "model" and f"shipped {c.framework} defaults measured on" in c.speed_note


def _what_decides(best: Candidate, close: Sequence[Candidate], preferred: str | None) -> str:
    """Among frameworks within each other's uncertainty, what chose ``best``: the spec's preference, else what is
    known rather than estimated (a sooner start, a shorter queue, a CUDA build), else the estimate or the fixed order."""
    if best.preferred:
        return "your preferred framework decides"
    pref = next((c for c in close if c.framework == preferred), None)
    if pref is not None:
        wait, pref_wait = (UNKNOWN_WAIT_S if w is None else w for w in (best.wait_s, pref.wait_s))
        if pref_wait > wait:
            return (f"preferred {preferred} would start later ({duration_words(pref_wait)} against "
                    f"{duration_words(wait)}), which is known, not estimated, so {best.framework} goes first")
        if pref.pending_jobs > best.pending_jobs:
            return (f"preferred {preferred} queues behind more jobs ({pref.pending_jobs} pending against "
                    f"{best.pending_jobs}), which is known, not estimated, so {best.framework} goes first")
        if not pref.gpu_build_ok:
            return f"preferred {preferred} has a CPU build and the job asks for GPUs, so {best.framework} goes first"
    who = "none of them is preferred (training.framework)" if pref is None else f"preferred {preferred} is among them"
    if preferred and pref is None:
        who = f"preferred {preferred} is not among them"
    if shipped_estimate(best) and all(shipped_estimate(c) for c in close):
        return (f"{who}, and nothing is measured on these nodes yet (the estimates are a development machine's "
                f"figures), so the fixed order ({', '.join(FRAMEWORKS)}) decides")
    if best.finish_s is not None and all(c.finish_s is not None and best.finish_s < 0.99 * c.finish_s for c in close):
        return f"{who}, so the nearest estimate decides"
    if all(best.pending_jobs < c.pending_jobs for c in close):
        return f"{who}, so the shorter queue decides"
    return f"{who}, and the estimates are equal, so the fixed order ({', '.join(FRAMEWORKS)}) decides"


def _headline(best: Candidate, ranked: list[Candidate], preferred: str | None, res: Resources) -> str:
    gpus, _, _ = _per_node(res)
    why = []
    rivals: dict[str, Candidate] = {}
    for c in ranked:
        if c.rank is not None and c.framework != best.framework and c.finish_s is not None:
            rivals.setdefault(c.framework, c)
    close = [c for c in rivals.values() if overlaps(best, c)]
    if not close and best.finish_s is not None and rivals \
            and best.finish_s < 0.99 * min(c.finish_s or 0 for c in rivals.values()):
        why.append(f"it finishes soonest ({_speed_words(best).split(' [')[0]})")
    if best.can_start_now:
        idle = f"{best.idle_gpus} idle GPUs" if gpus else f"{best.idle_cpus} idle CPUs"
        why.append(f"it can start now ({idle}, {best.pending_jobs} pending)")
    else:
        why.append(f"no feasible choice can start now; it has the shortest queue ({best.pending_jobs} pending)")
    if close:
        names = [best.framework, *(c.framework for c in close)]
        why.append(f"{', '.join(names[:-1])} and {names[-1]} finish within the estimates' "
                   f"uncertainty ({_speed_words(best, short=True).split(', ', 1)[1]} against "
                   + ", ".join(_speed_words(c, short=True).split(", ", 1)[1] for c in close) + "): "
                   + _what_decides(best, close, preferred))
    if best.preferred:
        if not close:
            why.append("it is your preferred framework")
    elif preferred and preferred not in {c.framework for c in close}:
        pref = [c for c in ranked if c.framework == preferred]
        feasible = [c for c in pref if c.rank is not None]
        if not pref or not any(c.installed for c in pref):
            why.append(f"preferred {preferred} is not installed anywhere reachable")
        elif not any(c.supported for c in pref):
            why.append(f"preferred {preferred} cannot express the graph")
        elif not feasible:
            why.append(f"preferred {preferred} has no partition big enough")
        elif feasible[0].finish_s is not None and best.finish_s is not None and feasible[0].finish_s > best.finish_s:
            p = feasible[0]
            why.append(f"preferred {preferred} finishes later, beyond the estimates' uncertainty (on {p.partition}: "
                       f"{_speed_words(p, short=True).split(', ', 1)[1]})")
        else:
            p = feasible[0]
            state = "can start now" if p.can_start_now else "would wait"
            idle = f"{p.idle_gpus} idle GPUs" if gpus else f"{p.idle_cpus} idle CPUs"
            why.append(f"preferred {preferred} {state} on {p.partition} ({idle}, {p.pending_jobs} pending)")
    return f"chose {best.framework} on partition {best.partition}: " + "; ".join(why)
