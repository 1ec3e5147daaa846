"""The whole run's time to result, in parts: what the selector ranks by and what it shows.

    time to result = wait + start-up + steps x step time + validation passes x their time
                     + checkpoint writes + the end of the run

- **start-up**: from submission to the first optimizer step once the job runs: the interpreter and the
  framework's import (``launch_s``: the calibration job's wall time less the program's own clock), the
  data's loading, indexing and normalisation pass and the model's build (``startup_s``), and the warm-up
  steps beyond their steady time (compilation, tracing: ``warmup_s``).
- **training**: epochs x training samples / samples per second (:mod:`schedulers.speed`), and each epoch's start
  beyond a step (its input pipeline started anew: ``epoch_s``; a completed run's steps hold it already).
- **validation**: one pass over the validation split after every epoch, and the test split once; the first
  pass's excess over a steady one (keras traces its evaluation there) once, where the calibration timed both.
- **checkpoints**: one write per epoch and per ``every_steps`` (as the program's loop writes them); the first
  write's excess (one-off costs) once, as for validation.
- **end**: the final model (with its ONNX export where the program writes one).

Each term comes from the calibration job of this graph where it measured it, else from the user's other
measurements on this framework and kind of nodes (their median), else from a stated default; every term
says which (:attr:`Estimate.sources`). The uncertainty is per term: a measured term is
:data:`~schedulers.speed.MEASURED_FACTOR` uncertain, a term from others' measurements
:data:`PEER_FACTOR`, a default :data:`DEFAULT_TERM_FACTOR`, and the training term the speed's own
factor (:mod:`schedulers.macs_model`); the range is the sum of the terms' lows to the sum of their highs.

On the local machine, the measured compute terms (start-up, training, validation) are scaled by the CPU load a
run would start under against the load the calibration job ran under (:mod:`schedulers.contention`), and say
so (:attr:`Estimate.load`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core.spec import PipelineSpec
from core.validate import Analysis
from schedulers.contention import MODEL_FACTOR, Contention, idle_like, idle_share, load_factor, load_words
from schedulers.shipped import WARMUP_STEPS, shipped
from schedulers.speed import (
    MEASURED_FACTOR,
    Measurement,
    Speed,
    train_acts_per_sample,
    train_conv_macs_per_sample,
    train_macs_per_sample,
)

PEER_FACTOR = 1.5
DEFAULT_TERM_FACTOR = 2.5
# Defaults when nothing was measured on these nodes (a loaded 2-core machine measured them: generous)
DEFAULT_LAUNCH_S = 5.0  # interpreter and framework import, for a framework without shipped figures
DEFAULT_STARTUP_S = 2.0  # the data and the model
SHIPPED_LABEL = "shipped default (a development machine's)"  # schedulers/shipped.py
CHECKPOINT_BYTES_PER_PARAM = 12  # weights and two optimizer moments, float32
# A checkpoint write: a fixed part and the bytes; measured on the development machine's local disk (3-9 ms at 62k
# parameters, 10-23 ms at 670k, 18-47 ms at 1.2M: tests/schedulers/data/estimate_runs.json). A parallel file system
# is slower: the first calibration on the nodes replaces these (the graph's own write, else the other graphs').
CHECKPOINT_FIXED_S = 0.003
DISK_BYTES_PER_S = 800e6
CHECKPOINT_FIXED_PARAMS = CHECKPOINT_FIXED_S * DISK_BYTES_PER_S / CHECKPOINT_BYTES_PER_PARAM  # the fixed part in params
DEFAULT_END_S = 1.0  # the final model and its ONNX export, beyond writing the weights
EVAL_SHARE = 1 / 3  # a sample's evaluation costs about its forward pass: a third of a training step


@dataclass(frozen=True)
class Counts:
    """How often the run does each thing, from the spec."""

    epochs: int
    train_samples: int
    steps: int
    val_passes: int
    val_samples: int
    test_samples: int
    checkpoints: int


def counts(spec: PipelineSpec, train_samples: int, total_samples: int | None, world: int = 1) -> Counts:
    """The run's steps, validation passes and checkpoint writes, as the generated program's loop does them."""
    t = spec.training
    per_step = max(spec.data.batch_size * world, 1)
    steps_per_epoch = max(math.ceil(train_samples / per_step), 1)
    steps = t.epochs * steps_per_epoch
    total = total_samples or round(train_samples / max(1.0 - spec.data.validation_split - spec.data.test_split, 0.05))
    val = round(total * spec.data.validation_split)
    test = round(total * spec.data.test_split)
    ckpts = t.epochs if t.checkpoint.every_epoch else 0
    every = t.checkpoint.every_steps
    if every:  # within epochs only: a step that ends an epoch writes the epoch's checkpoint
        ckpts += steps // every - steps // math.lcm(every, steps_per_epoch)
    return Counts(t.epochs, train_samples, steps, t.epochs if val else 0, val, test, ckpts)


@dataclass(frozen=True)
class Estimate:
    """One candidate's time to result in parts (seconds), its range and where each part comes from."""

    wait_s: float | None  # None: not known (the ranking counts an hour, and says so)
    startup_s: float
    train_s: float
    val_s: float
    checkpoint_s: float
    end_s: float
    low_s: float  # the run's time (no wait) at the low and high end of the uncertainty
    high_s: float
    sources: dict[str, str] = field(default_factory=dict)  # term -> "measured" | "others' measurements" | …
    counts: dict[str, int] = field(default_factory=dict)
    # The CPU load now against the measurement's and the factor start-up, training and validation were scaled by
    # (schedulers/contention.py): {"contention" (now), "now", "then", "cpus", "threads", "factor", "words"}; only
    # "contention" when the measurement's load is not known; empty when the load now is not (Slurm, a GPU job)
    load: dict[str, Any] = field(default_factory=dict)

    @property
    def run_s(self) -> float:
        return self.startup_s + self.train_s + self.val_s + self.checkpoint_s + self.end_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "run_s": self.run_s}


Term = tuple[float, float, str]  # seconds, uncertainty factor, source


def _term(measured: float | None, peers: Sequence[Measurement], of: Callable[[Measurement], float | None],
          default: float, scale: float = 1.0, label: str = "default") -> Term:
    if measured is not None:
        return measured * scale, MEASURED_FACTOR, "measured"
    values = [v for v in (of(m) for m in peers) if v is not None]
    if values:
        return statistics.median(values) * scale, PEER_FACTOR, f"median of {len(values)} other graph(s)"
    return default * scale, DEFAULT_TERM_FACTOR, label


def _eval_share(p: Measurement) -> float | None:
    """What one validation sample cost against one training sample in a measurement of another graph (a forward
    pass against forward and backward: 0.14-0.73 in the development machine's calibrations, by framework)."""
    if p.val_s is None or not p.val_samples or not p.step_s or not p.batch_size:
        return None
    return (p.val_s / p.val_samples) / (p.step_s / p.batch_size)


def _first_once(term: Term, first: float | None, steady: float | None, done: bool) -> Term:
    """A measured term counted at its steady figure, plus once what its first time took beyond it (keras's first
    validation pass traces the evaluation, a first checkpoint write pays one-off costs): first + (n - 1) x steady."""
    if not done or first is None or steady is None or term[2] != "measured":
        return term
    return term[0] + max(first - steady, 0.0), term[1], term[2]


def estimate(spec: PipelineSpec, analysis: Analysis, framework: str, speed: Speed, train_samples: int,
             total_samples: int | None, wait_s: float | None, world: int = 1,
             contention: Contention | None = None) -> Estimate:
    """The whole run for ``speed`` (a measurement of this graph, or the MACs model and the peers). ``contention``:
    the machine's CPU load now (a local CPU job; ``None`` on Slurm, whose jobs' CPUs are their own): the measured
    compute terms are scaled from the load they were measured under to it (:func:`load_scaled`)."""
    m, peers = speed.measurement, speed.peers
    idle = m is None and speed.idle  # the learned model's or the shipped figures: an idle machine's, scaled below

    def share(p: Measurement, seconds: float | None) -> float | None:  # a peer's start-up as on an idle machine,
        # like the learned model's steps
        return None if seconds is None else seconds * (idle_share(p.contention) if idle else 1.0)

    n = counts(spec, train_samples, total_samples, world)
    step_s = spec.data.batch_size * world / max(speed.samples_per_s, 1e-9)
    d = shipped(framework) if speed.shipped else None  # nothing measured on these nodes: a development machine's
    launch = _term(m.launch_s if m else None, peers, lambda p: share(p, p.launch_s), d.launch_s if d else DEFAULT_LAUNCH_S,
                   label=SHIPPED_LABEL if d else "default")
    start = _term(m.startup_s if m else None, peers, lambda p: share(p, p.startup_s), d.startup_s if d else DEFAULT_STARTUP_S,
                  label=SHIPPED_LABEL if d else "default")
    warm_measured = max(m.warmup_s - WARMUP_STEPS * m.step_s, 0.0) if m and m.warmup_s is not None else None
    warm = _term(warm_measured, peers, lambda p: None if p.warmup_s is None
                 else share(p, max(p.warmup_s - WARMUP_STEPS * p.step_s, 0.0)),
                 d.warmup_s if d else 0.0, label=SHIPPED_LABEL if d else "default")
    per_val = m.val_s / m.val_samples if m and m.val_s is not None and m.val_samples else None
    evaluated = n.val_passes * n.val_samples + n.test_samples
    per_train = step_s / max(spec.data.batch_size, 1)  # a training sample's share of a step
    val = _first_once(_term(per_val, peers, lambda p: None if (e := _eval_share(p)) is None else e * per_train,
                            per_train * EVAL_SHARE, evaluated),
                      m.val_first_s if m else None, m.val_s if m else None, evaluated > 0)
    params = analysis.total_params
    ckpt_default = CHECKPOINT_FIXED_S + params * CHECKPOINT_BYTES_PER_PARAM / DISK_BYTES_PER_S
    ckpt = _first_once(_term(m.checkpoint_s if m else None, peers,
                             lambda p: None if p.checkpoint_s is None else  # another graph's write, for these bytes
                             p.checkpoint_s * (CHECKPOINT_FIXED_PARAMS + params) / (CHECKPOINT_FIXED_PARAMS + p.params),
                             ckpt_default, n.checkpoints),
                       m.checkpoint_first_s if m else None, m.checkpoint_s if m else None, n.checkpoints > 0)
    end = _term(m.end_s if m else None, peers, lambda p: p.end_s, DEFAULT_END_S + ckpt_default)
    run_measured = m is not None and m.source != "calibration"  # a run's steps hold its epochs' starts
    epoch = _term(0.0 if run_measured else m.epoch_s if m else None, peers, lambda p: share(p, p.epoch_s),
                  d.epoch_s if d else 0.0, n.epochs, label=SHIPPED_LABEL if d else "default")
    train = (n.epochs * train_samples / max(speed.samples_per_s, 1e-9) + epoch[0], speed.factor,
             "measured" if speed.measured else "MACs model")
    startup = (launch[0] + start[0] + warm[0], max(launch[1], start[1], warm[1] if warm[0] else 1.0),
               "; ".join(f"{k} {v[2]}" for k, v in (("launch", launch), ("data and model", start),
                                                    ("warm-up", warm))))
    terms = {"startup": startup, "train": train, "val": val, "checkpoint": ckpt, "end": end}
    then = m.contention if m else idle_like(contention) if idle else None
    at = ("for the model's figures (an idle machine's)" if m is None
          else "at calibration" if m.source == "calibration" else f"in {m.source}")
    load = load_scaled(terms, contention, then, at)
    low = sum(v / f for v, f, _ in terms.values())
    high = sum(v * f for v, f, _ in terms.values())
    return Estimate(wait_s, *(terms[k][0] for k in ("startup", "train", "val", "checkpoint", "end")), low, high,
                    {k: v[2] for k, v in terms.items()},
                    {"epochs": n.epochs, "steps": n.steps, "val_passes": n.val_passes, "val_samples": n.val_samples,
                     "test_samples": n.test_samples, "checkpoints": n.checkpoints, "train_samples": train_samples,
                     "batch_size": spec.data.batch_size, "params": analysis.total_params,
                     "macs_per_sample": train_macs_per_sample(analysis),
                     "conv_macs_per_sample": train_conv_macs_per_sample(analysis),
                     "acts_per_sample": train_acts_per_sample(analysis)}, load)


SCALED = ("startup", "train", "val")  # the terms the load scales (docs/selector.md, "Load"): not the writes


def load_scaled(terms: dict[str, Term], now: Contention | None, then: Contention | None,
                at: str = "at calibration") -> dict[str, Any]:
    """Scale ``terms``' compute terms (:data:`SCALED`, in place) from the load their measurement was made under
    (``then``) to the load now, by :func:`schedulers.contention.load_factor`; a scaled term's uncertainty widens
    by the model's own (:data:`~schedulers.contention.MODEL_FACTOR`). Returns what was done, for the estimate's
    words, with the load now (``contention``: a completed run's measurement keeps it as the load it ran under);
    no ``factor`` when the load then is not known (a measurement from before loads were recorded), empty when
    the load now is not (a Slurm job)."""
    if now is None:
        return {}
    if then is None:
        return {"contention": now.to_dict()}
    factor = load_factor(now, then)
    if factor != 1.0:
        for name in SCALED:
            seconds, spread, source = terms[name]
            terms[name] = seconds * factor, spread * MODEL_FACTOR, f"{source}, ×{factor:.2g} for the load"
    return {"contention": now.to_dict(), "now": now.load, "then": then.load, "cpus": then.cpus,
            "threads": then.threads, "factor": factor, "words": load_words(now, then, at=at)}


_UNDER_ONE = {"s": "a second", "min": "a minute", "h": "6 min", "days": "a day"}  # what one step of each unit is


def span_words(low_s: float, high_s: float) -> str:
    """``3–12 min``; ``40 s–3 min`` when the ends need different units; one value (``30 min``) when both ends
    read the same (a run whose wait dwarfs its uncertainty): never ``30–30 min``."""
    lo, hi = short_duration(low_s), short_duration(high_s)
    if lo == hi:
        return lo
    if lo.split()[1] == hi.split()[1]:
        return f"{lo.split()[0]}–{hi}"
    return f"{lo}–{hi}"


def range_words(low_s: float, high_s: float) -> str:
    """``could be 3–12 min``; ``give or take under a minute`` when both ends read the same."""
    words = span_words(low_s, high_s)
    if "–" not in words:
        return f"give or take under {_UNDER_ONE[words.split()[1]]}"
    return f"could be {words}"


def short_duration(seconds: float) -> str:
    """``45 s``, ``4 min``, ``2.5 h``, ``3 days``: the unit a reader of an estimate wants."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"
