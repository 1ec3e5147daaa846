"""Shipped defaults: a fresh home's first estimate, before anything was measured on its nodes.

Without a single measurement the estimate once started from one rate for every framework (10 GMAC/s per CPU
core) and five seconds of start-up, and the first graph came out ten times too short: a small graph's step is
the framework's fixed cost, not its MACs, and TensorFlow's import alone takes half a minute on a loaded machine.
These figures are each framework's own, **measured on the 2-core x86-64 development machine** (AVX-512, 24 GB,
nothing else running, the programs at nice 19), and stand for an idle machine (each record made idle by the
load it ran under; the estimate scales them to the load now): the launch, start-up and warm-up of the calibration
jobs of the zoo's MLP, LeNet-5 and MNIST CNN by ``bench/estimates.py`` (tests/schedulers/data/estimate_runs.json,
beside the runs that followed), and the step time's line fitted to eight graphs of other shapes by
``bench/step_shapes.py`` (tests/schedulers/data/step_shapes.json). :func:`derive` turns those records into
:data:`SHIPPED`, and a test checks that it still does (and that the line, fitted to graphs that are not the zoo's,
puts the zoo's steps and runs within a factor of 2). The line is also the shape the learned MACs model scales to
a user's first measurements (schedulers/macs_model.py, :func:`~schedulers.macs_model.scaled`).

They are a machine class's, not the user's: they serve as they are only CPU jobs on nodes where this user has
measured nothing yet (one measurement there of the same framework, and the line is scaled to the user's figures;
of another framework only, the user's MACs rate takes over: :mod:`schedulers.speed`), with
:data:`SHIPPED_FACTOR` of uncertainty either way, and every estimate made from them says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schedulers.contention import Contention, idle_share
from schedulers.macs_model import Point, StepFit, coefficients, fit

SHIPPED_FACTOR = 3.0
WHERE = "a shared 2-core development machine"
WARMUP_STEPS = 3  # the program's CALIBRATION_WARMUP (schedulers/estimate.py imports it from here)
# The line's shape factor is its leave-one-out factor on the graphs it was fitted to, at least this: those graphs
# left out one at a time are nearer each other than a graph drawn elsewhere (paddle's line, within x1.3 of its
# eleven left out, put the zoo's LeNet-5 at 0.76 of its step; tests/schedulers/test_estimates.py)
SHAPE_MIN_FACTOR = 1.5
MAX_OVERHEAD_SHARE = 1.0  # derive()'s per-step overhead: at most this share of the cheapest graph's whole step


@dataclass(frozen=True)
class Defaults:
    """One framework's figures: the launch (interpreter and import), the data and model, the warm-up's
    excess over steady steps (tracing, compilation) and the step time's line (:class:`~schedulers.macs_model.StepFit`:
    seconds per step, per training MAC of the step, per parameter, per activation value of the step)."""

    launch_s: float
    startup_s: float
    warmup_s: float
    coef: tuple[float, float, float, float]
    shape_factor: float  # the line's own leave-one-out factor on the graphs it was fitted to (macs_model.fit)
    epoch_s: float = 0.0  # an epoch's start beyond a step (the calibrations' median; 0 where none timed it)

    def step(self) -> StepFit:
        """The line as it is, for nodes where nothing was measured: :data:`SHIPPED_FACTOR` (another machine's)."""
        return StepFit(self.coef, SHIPPED_FACTOR, 0)

    def shape(self) -> StepFit:
        """The line as a shape to scale to the user's measurements (macs_model.scaled): its own factor."""
        return StepFit(self.coef, self.shape_factor, 0)

    def words(self, framework: str) -> str:
        return (f"shipped {framework} defaults measured on {WHERE}, not on these nodes: {self.step().line_words()}"
                f", could be x{SHIPPED_FACTOR:g} off until a calibration")


# derive() of tests/schedulers/data/estimate_runs.json's calibrations and step_shapes.json's variants (the graphs not
# in the zoo; tests/schedulers/test_estimates.py checks it)
SHIPPED: dict[str, Defaults] = {
    "torch": Defaults(1.34, 1.53, 0.02, (0.0003945, 4.606e-12, 7.173e-10, 2.129e-09), 1.59, 0.0002),
    "keras": Defaults(3.08, 0.37, 0.51, (0.0004481, 0.0, 3.657e-09, 2.171e-09), 2.4, 0.0189),
    "paddle": Defaults(0.93, 0.74, 0.02, (0.002303, 1.201e-11, 2.607e-09, 7.616e-09), 1.5, 0.0005),
}


def derive(calibrations: Sequence[Mapping[str, Any]], shapes: Sequence[Mapping[str, Any]]) -> Defaults | None:
    """One framework's defaults: the medians of its calibration jobs' ``launch_s``, ``startup_s`` and the warm-up's
    excess, and the step-time line fitted to ``shapes``, step times of graphs of many shapes (each with its
    training MACs, parameters, activation values per sample and batch size: bench/step_shapes.py); ``None``
    without any calibration or shape.

    The line is the learned MACs model's non-negative fit (schedulers/macs_model.py), fitted to graphs other than
    the zoo's so that the zoo's runs check it (tests/schedulers/test_estimates.py). Made to withstand records taken
    under a swinging load: a graph recorded more than once counts once, at the median of its step times, and the
    per-step overhead is at most :data:`MAX_OVERHEAD_SHARE` of the cheapest graph's whole step (unbounded, torch's
    records of 2026-12-01, each graph timed minutes apart under loads of 11-22, put 327 ms of every step into the
    overhead, more than the MLP's whole step). Each calibration's figures are made idle first
    (:func:`schedulers.contention.idle_share` of its ``contention``; a record without one is taken as it is)."""
    def idle(c: Mapping[str, Any], name: str) -> float:  # as on an idle machine, where the record has its load
        return float(c[name]) * idle_share(Contention.from_dict(c.get("contention")))

    graphs: dict[tuple[float, float, float, float], list[float]] = {}
    for c in shapes:
        graphs.setdefault((float(c["macs_per_sample"]), float(c["params"]), float(c["batch_size"]),
                           float(c["acts_per_sample"])), []).append(idle(c, "step_s"))
    points = [Point(macs, params, batch, statistics.median(steps), 0.0, acts)
              for (macs, params, batch, acts), steps in graphs.items()]
    if not points or not calibrations:
        return None

    def median(name: str) -> float:
        values = [idle(c, name) for c in calibrations if c.get(name) is not None]
        return statistics.median(values) if values else 0.0

    warm = statistics.median(max(idle(c, "warmup_s") - WARMUP_STEPS * idle(c, "step_s"), 0.0) for c in calibrations)
    line = coefficients(points, MAX_OVERHEAD_SHARE * min(p.step_s for p in points))
    own = fit(points)
    return Defaults(round(median("launch_s"), 2), round(median("startup_s"), 2), round(warm, 2),
                    tuple(float(f"{v:.4g}") for v in line),  # type: ignore[arg-type]
                    round(max(own.factor, SHAPE_MIN_FACTOR) if own is not None else SHIPPED_FACTOR, 2),
                    round(median("epoch_s"), 4))


def shipped(framework: str) -> Defaults | None:
    return SHIPPED.get(framework)
