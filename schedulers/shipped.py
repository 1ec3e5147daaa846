"""Shipped defaults: a fresh home's first estimate, before anything was measured on its nodes.

Without a single measurement the estimate once started from one rate for every framework (10 GMAC/s per CPU
core) and five seconds of start-up, and the first graph came out ten times too short: a small graph's step is
the framework's fixed cost, not its MACs, and TensorFlow's import alone takes half a minute on a loaded machine.
These figures are each framework's own, **measured on the 2-core x86-64 development machine** (AVX-512, 24 GB,
nothing else running, the programs at nice 19) by ``bench/estimates.py``, and stand for an idle machine (each
record made idle by the load it ran under; the estimate scales them to the load now): the
calibration jobs of the zoo's MLP, LeNet-5 and MNIST CNN (their launch, start-up, warm-up and step time),
recorded in tests/schedulers/data/estimate_runs.json beside the runs that followed. :func:`derive` turns those
records into :data:`SHIPPED`, and a test checks that it still does (and that figures derived from two of the
pipelines estimate the third's run within a factor of 2).

They are a machine class's, not the user's: they serve only CPU jobs on nodes where this user has measured
nothing yet (one measurement there, of any framework, and the user's own figures take over:
:mod:`schedulers.speed`), with :data:`SHIPPED_FACTOR` of uncertainty either way, and every estimate made from
them says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schedulers.contention import Contention, idle_share
from schedulers.macs_model import Point, StepFit, coefficients

SHIPPED_FACTOR = 3.0
WHERE = "a shared 2-core development machine"
WARMUP_STEPS = 3  # the program's CALIBRATION_WARMUP (schedulers/estimate.py imports it from here)
MAX_OVERHEAD_SHARE = 1.0  # derive()'s per-step overhead: at most this share of the cheapest graph's whole step


@dataclass(frozen=True)
class Defaults:
    """One framework's figures: the launch (interpreter and import), the data and model, the warm-up's
    excess over steady steps (tracing, compilation) and the step time's line (:class:`~schedulers.macs_model.StepFit`:
    seconds per step, per training MAC of the step, per parameter)."""

    launch_s: float
    startup_s: float
    warmup_s: float
    coef: tuple[float, float, float]

    def step(self) -> StepFit:
        return StepFit(self.coef, SHIPPED_FACTOR, 0)

    def words(self, framework: str) -> str:
        overhead, per_mac, per_param = self.coef
        return (f"shipped {framework} defaults measured on {WHERE}, not on these nodes: "
                f"{overhead * 1000:.1f} ms per step"
                + (f" + MACs at {1 / per_mac / 1e9:,.2f} GMAC/s" if per_mac > 0 else "")
                + (f" + {per_param * 1e9:.2f} ns per parameter" if per_param > 0 else "")
                + f", could be x{SHIPPED_FACTOR:g} off until a calibration")


# derive() of tests/schedulers/data/estimate_runs.json's calibrations (tests/schedulers/test_estimates.py checks it)
SHIPPED: dict[str, Defaults] = {
    "torch": Defaults(1.68, 1.92, 0.02, (0.001017, 1.626e-11, 0.0)),
    "keras": Defaults(3.76, 0.47, 0.6, (0.006656, 9.908e-12, 0.0)),
    "paddle": Defaults(1.13, 0.9, 0.02, (0.003091, 5.116e-11, 0.0)),
}


def derive(calibrations: Sequence[Mapping[str, Any]]) -> Defaults | None:
    """One framework's defaults from its calibration jobs' figures: the medians of ``launch_s``, ``startup_s`` and
    the warm-up's excess, and the step-time line through their ``step_s`` against training MACs per step and
    parameters (the MACs model's non-negative fit, exact through two graphs); ``None`` without any.

    Made to withstand records taken under a swinging load: a graph recorded more than once counts once, at the
    median of its step times (one job under a burst of load does not pull the line), and the per-step overhead is
    no more than the steps show: at most :data:`MAX_OVERHEAD_SHARE` of the cheapest graph's whole step, the rest of
    each step being the MACs' and parameters'. Unbounded, the fit of torch's records (each graph's steps timed
    minutes apart under loads of 11-22, LeNet-5's 2.6x the MLP's with fewer MACs) put 327 ms of every step into the
    overhead, more than the MLP's whole step (314 ms); derived from two pipelines to estimate the third, the bound
    also brought every MNIST CNN estimate nearer on the loaded machine's records of 2026-12-01. A lower bound (half
    the cheapest step) was tried and is worse: with two graphs it forces their difference into the MACs (paddle's
    MLP 8x over). Each record's figures are made idle first (:func:`schedulers.contention.idle_share` of its
    ``contention``; a record without one is taken as it is)."""
    def idle(c: Mapping[str, Any], name: str) -> float:  # as on an idle machine, where the record has its load
        return float(c[name]) * idle_share(Contention.from_dict(c.get("contention")))

    graphs: dict[tuple[float, float, float], list[float]] = {}
    for c in calibrations:
        graphs.setdefault((float(c["macs_per_sample"]), float(c["params"]), float(c["batch_size"])),
                          []).append(idle(c, "step_s"))
    points = [Point(*graph, statistics.median(steps)) for graph, steps in graphs.items()]
    if not points:
        return None

    def median(name: str) -> float:
        values = [idle(c, name) for c in calibrations if c.get(name) is not None]
        return statistics.median(values) if values else 0.0

    warm = statistics.median(max(idle(c, "warmup_s") - WARMUP_STEPS * idle(c, "step_s"), 0.0) for c in calibrations)
    line = coefficients(points, MAX_OVERHEAD_SHARE * min(p.step_s for p in points))
    return Defaults(round(median("launch_s"), 2), round(median("startup_s"), 2), round(warm, 2),
                    tuple(float(f"{v:.4g}") for v in line))  # type: ignore[arg-type]


def shipped(framework: str) -> Defaults | None:
    return SHIPPED.get(framework)
