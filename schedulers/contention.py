"""CPU contention: the load a calibration job was measured under, the load a run would start under, and how
much slower the run's compute is for the difference.

A step time measured on a shared machine is that machine's at that moment: a calibration job timed at a load
average of 8 and a run started at 20 are two different machines. Each measurement of the local scheduler
records the load it ran beside (:func:`during`: the mean count of runnable tasks while it ran, read at each of
the calibration's polls, less itself; the 1-minute load average, ``os.getloadavg``, before and after it is kept
too), the machine's CPUs and the program's threads (:class:`Contention`). The estimate reads the load now
(:func:`here`: the runnable tasks, read the same way, not the lagging load average) and scales the compute
terms (start-up, training steps, validation passes; not the writes) by :func:`load_factor`, the ratio of the
slowdowns now and then:

    slowdown(load) = max(1, (LOAD_WEIGHT x load + threads) / cpus)

``threads`` runnable threads of the program share ``cpus`` cores with ``load`` other runnable tasks: beyond
one thread per core, each gets ``cpus / (load + threads)`` of one. ``LOAD_WEIGHT`` is what one other task
costs the program: 1, as ``bench/load_slowdown.py`` measured it (the best fit 0.85; docs/selector.md, "Load").
The load now and the load a job ran beside are both without the job itself, so they compare alike.

A Slurm job's CPUs are allocated to it (``cpus_per_task``), not shared: a Slurm measurement, and a Slurm
candidate, count as uncontended (no :class:`Contention`, factor 1). Other users' jobs on a node that Slurm
oversubscribes, or processes outside Slurm on it, are not seen.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

LOAD_WEIGHT = 1.0  # what one task of the 1-minute load average costs the program (bench/load_slowdown.py)
SAME = 0.05  # a factor within 5% of 1 is not applied (the load average's own noise)
NOW_SAMPLES = 10  # readings of the runnable tasks that make the load now (:func:`here`), NOW_INTERVAL_S apart
NOW_INTERVAL_S = 0.02
MIN_SAMPLES = 4  # readings of the runnable tasks (one per poll, every 0.5 s) that make a job's contention
MODEL_FACTOR = 1.2  # a scaled term's uncertainty widens by this: the model's root mean square error, step times
# of bench/load_slowdown.py's jobs predicted from one another (tests/schedulers/data/load_slowdown.json)


@dataclass(frozen=True)
class Contention:
    """The CPU contention on the machine a job ran on (or a run would start on)."""

    load: float  # other runnable tasks: beside the job, without it (:func:`during`); now, read by :func:`here`
    cpus: int  # the machine's CPUs (os.cpu_count)
    threads: int  # the program's compute threads (the generated programs use every CPU the job may run on)
    load_before: float | None = None  # the 1-minute load average: a job's, read before it was submitted
    load_end: float | None = None  # and after it ended (its own threads in it)
    runnable: float | None = None  # the mean count of runnable tasks while it ran (itself and the reader included)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Any) -> Contention | None:
        """A recorded contention, or ``None`` for anything else (a row from before loads were recorded)."""
        if not isinstance(doc, Mapping):
            return None
        load, cpus, threads = doc.get("load"), doc.get("cpus"), doc.get("threads")
        if not all(_number(v) for v in (load, cpus, threads)) or cpus < 1 or threads < 1 or load < 0:  # type: ignore[operator]
            return None
        before, end, runnable = (doc.get(k) for k in ("load_before", "load_end", "runnable"))
        return cls(float(load), int(cpus), int(threads), *(float(v) if _number(v) else None  # type: ignore[arg-type]
                                                          for v in (before, end, runnable)))

    @property
    def slowdown(self) -> float:
        return slowdown(self.load, self.threads, self.cpus)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def here(samples: int = NOW_SAMPLES, interval_s: float = NOW_INTERVAL_S) -> Contention:
    """This machine's contention now, for a program using every CPU this process may run on: the mean of
    ``samples`` readings of the runnable tasks (:func:`runnable`, ``interval_s`` apart) less the reader, where
    /proc/stat has them; else the 1-minute load average.

    Not the load average first: it lags a minute, and an estimate is most often taken right after a job of the
    user's own ended (the calibration job it reads, the run before). On an idle machine the bench's runs were
    estimated at loads of 0.5-1.2 left by those jobs against 0.0 at calibration, and predicted 1.2-1.6x too long
    (docs/selector.md, "Load"). The load average is kept beside it (``load_before``)."""
    cpus = os.cpu_count() or 1
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    average = os.getloadavg()[0]
    seen = []
    for i in range(samples):
        if i:
            time.sleep(interval_s)
        reading = runnable()
        if reading is None:
            break
        seen.append(reading)
    load = max(statistics.fmean(seen) - 1, 0.0) if len(seen) == samples and seen else average
    return Contention(load, cpus, max(min(threads, cpus), 1), load_before=average)


def runnable() -> int | None:
    """The tasks runnable right now (``procs_running`` of /proc/stat; the reader itself among them), ``None`` where
    there is no /proc/stat. No lag, unlike the load average, and no smoothing either: a job's readings are averaged
    (:func:`during`)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("procs_running ")), None)
    except (OSError, ValueError, IndexError):
        return None


def during(before: Contention, load_end: float, seconds: float, samples: Sequence[int] = ()) -> Contention:
    """The contention a job of ``seconds`` ran under: with :data:`MIN_SAMPLES` or more ``samples`` of
    :func:`runnable` taken while it ran, their mean less the reader and the job's own threads; else from the load
    average before it (``before``: :func:`here`) and after it: their mean, the job's own share taken out of the
    second (the 1-minute average has taken in ``1 - exp(-seconds / 60)`` of the job's ``threads`` by its end).
    The load average lags a minute: when the load fell from 14 to a few during a job, the average said 11, the
    runnable tasks 4, and the step time agreed with the second (docs/selector.md, "Load")."""
    own = before.threads * (1.0 - math.exp(-max(seconds, 0.0) / 60.0))
    load = (before.load + max(load_end - own, 0.0)) / 2
    seen = statistics.fmean(samples) if len(samples) >= MIN_SAMPLES else None
    if seen is not None:
        load = max(seen - 1 - before.threads, 0.0)
    return Contention(load, before.cpus, before.threads, load_before=before.load, load_end=load_end, runnable=seen)


def slowdown(load: float, threads: int, cpus: int, weight: float = LOAD_WEIGHT) -> float:
    """How many times slower ``threads`` compute threads run beside ``load`` other runnable tasks on ``cpus``
    cores than alone: ``max(1, (weight x load + threads) / cpus)``."""
    return max(1.0, (weight * max(load, 0.0) + threads) / max(cpus, 1))


def load_factor(now: Contention | None, then: Contention | None) -> float:
    """How many times longer a compute term measured under ``then`` takes under ``now``: 1 when either is not
    known, or when the two differ by less than :data:`SAME`. The threads and CPUs are the measurement's (the same
    program on the same kind of machine)."""
    if now is None or then is None:
        return 1.0
    factor = slowdown(now.load, then.threads, then.cpus) / then.slowdown
    return 1.0 if abs(factor - 1.0) < SAME else factor


def idle_share(c: Contention | None) -> float:
    """What a compute figure measured under ``c`` would have been on an idle machine: 1 / its slowdown; 1 when the
    load is not known (a Slurm job's CPUs are its own). The learned model and the shipped defaults are fitted on
    figures made idle this way, and scaled to the load now (:func:`idle_like`)."""
    return 1.0 / c.slowdown if c is not None else 1.0


def idle_like(now: Contention | None) -> Contention | None:
    """The contention figures made idle (:func:`idle_share`) stand for: no other load, on a machine like ``now``'s."""
    return None if now is None else Contention(0.0, now.cpus, now.threads)


def load_words(now: Contention, then: Contention, at: str = "at calibration",
               what: str = "start-up, training and validation") -> str:
    """``load 3.1 now vs 0.4 at calibration (2 CPUs): start-up, training and validation ×2.1``; ``at``: where the
    measurement was made (``in run r-12``, a completed run's figures)."""
    factor = load_factor(now, then)
    effect = f"{what} ×{factor:.2g}" if factor != 1.0 else "no change"
    return f"load {now.load:.1f} now vs {then.load:.1f} {at} ({then.cpus} CPUs): {effect}"
