"""The learned MACs model: a graph's step time before it is calibrated, from other graphs' measurements.

A training step of a graph never measured costs, on a framework and kind of nodes,

    step_s = overhead + training MACs of the step / rate + parameters x update cost

(the framework's fixed cost per step, the products of the forward and backward passes, the optimizer's
pass over the weights). The convolutions' share of the MACs is recorded with every measurement
(:attr:`Point.conv_macs_per_sample`) but not fitted as an op family of its own: tried on the recorded zoo
figures (tests/schedulers/data/step_times.json), a separate convolution rate fitted to the MLP and
LeNet-5 predicted the MNIST CNN up to 15x off, the single rate within 2.6x. The three coefficients are fitted, none negative, to the user's measurements of
*other* graphs on the same framework and nodes (calibration jobs and completed runs, :mod:`schedulers.speed`),
weighted so that each measurement's *relative* error counts the same. How far off it may be is the fit's
own leave-one-out error: each measurement predicted by a fit without it; the range shown is
``estimate / factor … estimate x factor`` with ``factor = exp(2 x rms log error)`` (about 95% of
the left-out measurements fall inside), never narrower than :data:`MIN_FACTOR`.

With fewer than :data:`MIN_POINTS` measurements the fit would only echo them: the model is the median
MACs/s rate of those there are (:data:`FEW_FACTOR` uncertain), and with none at all a default rate per
CPU core or GPU (:data:`DEFAULT_FACTOR`: an order of magnitude either way, and said so).
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

    def features(self) -> list[float]:
        return [1.0, self.macs_per_sample * self.batch_size, self.params]


@dataclass(frozen=True)
class StepFit:
    """``step_s = coef · (1, training MACs per step, parameters)``, and its uncertainty factor."""

    coef: tuple[float, ...]
    factor: float
    points: int

    def step_s(self, macs_per_sample: float, params: float, batch_size: float, conv_macs_per_sample: float = 0.0
               ) -> float:
        point = Point(macs_per_sample, params, batch_size, 0.0, conv_macs_per_sample)
        return max(float(np.dot(self.coef, point.features())), 1e-6)

    def words(self) -> str:
        overhead, per_mac, per_param = self.coef
        return (f"learned MACs model: {overhead * 1000:.1f} ms per step"
                + (f" + MACs at {1 / per_mac / 1e9:,.2f} GMAC/s" if per_mac > 0 else "")
                + (f" + {per_param * 1e9:.2f} ns per parameter" if per_param > 0 else "")
                + f", fitted to {self.points} other graph(s) on these nodes, within x{self.factor:.1f} "
                  "of the ones left out")


def _solve(points: Sequence[Point], overhead: float | None = None) -> np.ndarray:
    """Non-negative weighted least squares, exactly: with three coefficients, every subset of them set
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


def fit(points: Sequence[Point]) -> StepFit | None:
    """The fit, or ``None`` with fewer than :data:`MIN_POINTS` usable points (a step time, MACs and a batch)."""
    usable = [p for p in points if p.step_s > 0 and p.macs_per_sample > 0 and p.batch_size > 0]
    if len(usable) < MIN_POINTS:
        return None
    coef = _solve(usable)
    errors = []
    for i, left_out in enumerate(usable):
        rest = usable[:i] + usable[i + 1:]
        c = _solve(rest)
        predicted = max(float(np.dot(c, left_out.features())), 1e-6)
        errors.append(math.log(predicted / left_out.step_s))
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    factor = min(max(math.exp(2 * rms), MIN_FACTOR), MAX_FACTOR)
    return StepFit(tuple(float(c) for c in coef), factor, len(usable))
