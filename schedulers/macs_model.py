"""The learned MACs model: a graph's step time before it is calibrated, from other graphs' measurements.

A training step of a graph never measured costs, on a framework and kind of nodes,

    step_s = overhead + training MACs of the step / rate + parameters x update cost
             + activation values of the step x cost per value

(the framework's fixed cost per step, the products of the forward and backward passes, the optimizer's pass over
the weights, and the layers' outputs written and read again by the backward pass: a small convolution net's step is
as much its activations as its MACs — LeNet-5 has fewer MACs and parameters than the zoo's MLP and its step takes
twice as long, with five times the activation values). Without the last term, no line through other graphs could
put LeNet-5's step above the MLP's: fitted to eight graphs of other shapes (bench/step_shapes.py), the three-term
line put LeNet-5 at 0.36-0.50 of its step, the four-term one at 0.62-0.77 (tests/schedulers/test_estimates.py).

Two ways to a line, chosen by which predicts the user's own measurements better:

- **a fit** of the four coefficients, none negative, to the user's measurements of *other* graphs on the same
  framework and nodes (calibration jobs and completed runs, :mod:`schedulers.speed`), weighted so that each
  measurement's *relative* error counts the same (:func:`fit`; :data:`MIN_POINTS` or more);
- **a prior scaled** to them (:func:`scaled`): the framework's shipped line (schedulers/shipped.py, fitted on a
  development machine to graphs of many shapes) times the geometric mean of the user's measured / predicted, which
  carries the prior's shape (what a graph costs beside another) to the user's nodes from one measurement on.

How far off it may be is its own leave-one-out error: each measurement predicted without it; the range shown is
``estimate / factor … estimate x factor`` with ``factor = exp(2 x rms log error)`` (about 95% of the left-out
measurements fall inside), never narrower than :data:`MIN_FACTOR`. The convolutions' share of the MACs is recorded
with every measurement (:attr:`Point.conv_macs_per_sample`) but not fitted as an op family of its own: tried on the
zoo's step times of a loaded machine (2026-12-01), a separate convolution rate fitted to the MLP and LeNet-5
predicted the MNIST CNN up to 15x off; the activation values carry what the convolutions' rate was meant to.

With neither (no prior, fewer than :data:`MIN_POINTS` measurements) the model is the median MACs/s rate of those
there are (:data:`FEW_FACTOR` uncertain), and with none at all a default rate per CPU core or GPU
(:data:`DEFAULT_FACTOR`: an order of magnitude either way, and said so).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_POINTS = 3
MIN_FACTOR = 1.3
FEW_FACTOR = 3.0
DEFAULT_FACTOR = 10.0
MAX_FACTOR = 20.0


@dataclass(frozen=True)
class Point:
    """One measured graph: its training MACs per sample, parameters, batch size and step time."""

    macs_per_sample: float
    params: float
    batch_size: float
    step_s: float
    conv_macs_per_sample: float = 0.0  # the convolutions' share of macs_per_sample
    acts_per_sample: float = 0.0  # the layers' output values of one sample (speed.train_acts_per_sample)

    def features(self) -> list[float]:
        return [1.0, self.macs_per_sample * self.batch_size, self.params, self.acts_per_sample * self.batch_size]


@dataclass(frozen=True)
class StepFit:
    """``step_s = coef · (1, training MACs per step, parameters, activation values per step)``, and its
    uncertainty factor. ``scale``: not 1 where the line is a prior scaled to the user's measurements (:func:`scaled`:
    ``coef`` already scaled, ``scale`` said in the words)."""

    coef: tuple[float, ...]
    factor: float
    points: int
    scale: float = 1.0
    prior: str = ""  # the scaled prior's name ("shipped torch line"); "": a fit of the user's own

    def step_s(self, macs_per_sample: float, params: float, batch_size: float, acts_per_sample: float = 0.0
               ) -> float:
        point = Point(macs_per_sample, params, batch_size, 0.0, 0.0, acts_per_sample)
        return max(float(np.dot(self.coef, point.features())), 1e-6)

    def line_words(self) -> str:
        overhead, per_mac, per_param, per_act = self.coef
        return (f"{overhead * 1000:.1f} ms per step"
                + (f" + MACs at {1 / per_mac / 1e9:,.2f} GMAC/s" if per_mac > 0 else "")
                + (f" + {per_param * 1e9:.2f} ns per parameter" if per_param > 0 else "")
                + (f" + {per_act * 1e9:.2f} ns per activation value" if per_act > 0 else ""))

    def words(self) -> str:
        if self.prior:
            checked = (f"within x{self.factor:.1f} of the ones left out" if self.points > 1
                       else f"could be x{self.factor:.1f} off")
            return (f"learned MACs model: the {self.prior} x{self.scale:.2f} ({self.line_words()}), scaled to "
                    f"{self.points} other graph(s) on these nodes, {checked}")
        return (f"learned MACs model: {self.line_words()}, fitted to {self.points} other graph(s) on these nodes, "
                f"within x{self.factor:.1f} of the ones left out")


def _solve(points: Sequence[Point], overhead: float | None = None) -> np.ndarray:
    """Non-negative weighted least squares, exactly: with four coefficients, every subset of them set
    free (the others zero) is solved, and the best solution without a negative coefficient wins.
    ``overhead``: the first coefficient held at that value, the others fitted to the rest of each step."""
    a = np.array([p.features() for p in points], dtype=float)
    b = np.array([p.step_s for p in points], dtype=float)
    scale = a.max(axis=0)
    scale[scale == 0] = 1.0
    aw, bw = (a / scale) / b[:, None], np.ones(len(points))  # relative errors: each row divided by its step time
    free = range(a.shape[1])
    if overhead is not None:
        bw, free = bw - overhead / b, range(1, a.shape[1])
    best, best_err = np.zeros(a.shape[1]), float("inf")
    for subset in itertools.chain.from_iterable(itertools.combinations(free, k) for k in range(1, len(free) + 1)):
        cols = list(subset)
        sol, *_ = np.linalg.lstsq(aw[:, cols], bw, rcond=None)
        if (sol < 0).any():
            continue
        coef = np.zeros(a.shape[1])
        coef[cols] = sol
        err = float(np.sum((aw @ coef - bw) ** 2))
        if err < best_err - 1e-15:
            best, best_err = coef, err
    if overhead is not None:
        best[0] = overhead * scale[0]
    return best / scale


def coefficients(points: Sequence[Point], max_overhead: float | None = None) -> tuple[float, ...]:
    """The non-negative fit's coefficients without its uncertainty (which needs :data:`MIN_POINTS`): exact
    through two points (schedulers/shipped.py). ``max_overhead``: the per-step overhead at most this; where the
    fit's is more, it is held there and the other two fitted to the rest of each step (the best fit within the
    bound: the error is convex in the coefficients, so a bound the free fit exceeds is met at the bound)."""
    coef = _solve(points)
    if max_overhead is not None and coef[0] > max_overhead:
        coef = _solve(points, overhead=max_overhead)
    return tuple(float(c) for c in coef)


def usable(points: Sequence[Point]) -> list[Point]:
    """The points a line can be fitted or scaled to: a step time, MACs, a batch and activation values (a
    measurement cached before they were recorded has none)."""
    return [p for p in points if p.step_s > 0 and p.macs_per_sample > 0 and p.batch_size > 0 and p.acts_per_sample > 0]


def _factor(errors: Sequence[float]) -> float:
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    return min(max(math.exp(2 * rms), MIN_FACTOR), MAX_FACTOR)


def fit(points: Sequence[Point]) -> StepFit | None:
    """The fit, or ``None`` with fewer than :data:`MIN_POINTS` usable points."""
    points = usable(points)
    if len(points) < MIN_POINTS:
        return None
    coef = _solve(points)
    errors = []
    for i, left_out in enumerate(points):
        c = _solve(points[:i] + points[i + 1:])
        errors.append(math.log(max(float(np.dot(c, left_out.features())), 1e-6) / left_out.step_s))
    return StepFit(tuple(float(c) for c in coef), _factor(errors), len(points))


def _scale(prior: StepFit, points: Sequence[Point]) -> float:
    """The geometric mean of measured / predicted over ``points``."""
    logs = [math.log(p.step_s / prior.step_s(p.macs_per_sample, p.params, p.batch_size, p.acts_per_sample))
            for p in points]
    return math.exp(sum(logs) / len(logs))


def scaled(prior: StepFit, points: Sequence[Point], name: str) -> StepFit | None:
    """``prior`` scaled to the user's measurements of other graphs, or ``None`` without a usable one. Its factor:
    with one measurement, :data:`FEW_FACTOR` (nothing left out to check it on); with more, each measurement
    predicted by the prior scaled to the others, and never under the prior's own (``prior.factor``: how far its
    shape was off the graphs left out of it; a scale checked on two measurements alone would claim less)."""
    points = usable(points)
    if not points:
        return None
    scale = _scale(prior, points)
    if len(points) == 1:
        factor = max(FEW_FACTOR, prior.factor)
    else:
        factor = max(_factor([math.log(_scale(prior, points[:i] + points[i + 1:]) / _scale(prior, [p]))
                              for i, p in enumerate(points)]), prior.factor)
    return StepFit(tuple(c * scale for c in prior.coef), factor, len(points), scale, name)


def learned(points: Sequence[Point], prior: StepFit | None, name: str = "") -> StepFit | None:
    """The line the estimate uses before a graph's own calibration: of :func:`fit` and :func:`scaled` (where
    there is a prior), the one whose measurements left out were predicted better (the smaller factor; the
    scaled prior where they tie, its shape being many graphs'); ``None`` with neither."""
    candidates = [f for f in (scaled(prior, points, name) if prior is not None else None, fit(points))
                  if f is not None]
    return min(candidates, key=lambda f: f.factor) if candidates else None
