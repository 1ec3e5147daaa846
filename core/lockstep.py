"""Lockstep training: the three frameworks' programs train a spec the same way, step for step.

:func:`check_training` generates each framework's ``train.py`` for one *check spec* — the spec with
its augmentation removed, every dropout probability 0, fp32, a "train" record after every step, no
checkpoints, and the same canonical start weights (``training.init_weights``, drawn as
:mod:`core.equivalence` draws them) — and runs each for the same number of optimizer steps on the
CPU, one subprocess at a time. The programs already share the rest: the data split and the epoch
order (``runtime.py``: one numpy generator keyed by seed and epoch), the optimizer's settings and the
learning-rate formula. The report holds each framework's loss at every step and the largest relative
difference of its losses and of its final weights (read back in the canonical layout by
:mod:`core.trained`) against torch's.

With a floor (``floor_samples`` > 0) torch trains again from ``floor_samples`` starts, each weight moved one
float32 ulp up or down (:func:`one_ulp_away`), and the bound is twice the largest of those runs' differences
from torch's where that exceeds the targets (:attr:`LockstepReport.tolerances` says why several and the largest).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.codegen import generate
from core.equivalence import not_installed
from core.errors import FlowTrainError, Problem
from core.frameworks import FRAMEWORKS
from core.lockstep_launch import run_program
from core.spec import PipelineSpec
from core.trained import TrainedModelError, read_trained_many
from core.validate import validate
from core.weights import random_canonical

DEFAULT_STEPS = 50
LOSS_TOLERANCE = 1e-4  # relative, at every step
WEIGHT_TOLERANCE = 1e-3  # relative (‖difference‖ / ‖torch's‖, per array), after the last step
RUN_TIMEOUT_S = 1800
FLOOR = "torch-1ulp"  # the floor runs' name: sample k is f"{FLOOR}-{k}" (check_training(floor_samples=…))
DEFAULT_FLOOR_SAMPLES = 3  # floor runs: each one more torch run (mnist_cnn: 6 s on two idle cores, 20 s at load 9)
ONE_RANK = "torch-1-rank"  # with ranks > 1: torch on one process with the whole global batch
RANKED_EPOCH_STEPS = 20  # with ranks > 1: an epoch of this many full global batches (see ranked_spec)
FLOOR_FACTOR = 2.0  # with a floor: within twice torch's largest one-ulp spread is lockstep (see tolerances)
NOT_COMPARED = "not compared"  # a run that trained where torch's own did not
NOT_COMPARED_WHY = "trained, but torch's own run did not, so there is nothing to compare it with"
SWITCHED_OFF = "augmentation and dropout are switched off for the check; fp32 on the CPU"
# An attention's key bias (the middle third of torch's packed in_proj_bias, which `comparable` splits off) adds
# q·b_k to every score of a query, the same for every key, and softmax ignores a constant: the loss does not
# depend on it, its gradient is 0 in exact arithmetic and float32 rounding noise in any program, and Adam,
# which divides a gradient by its own running size, steps it by up to lr a step in that noise's direction.
# Its difference is reported, not held to the weight bound.
GRADIENT_FREE = ("in_proj_bias[key]",)
GRADIENT_FREE_WHY = ("an attention's key bias: softmax is invariant to it, so its gradient is 0 in exact arithmetic "
                     "and Adam steps it on float32 noise")


class LockstepError(FlowTrainError):
    """check_training's arguments that cannot give a check; carries every problem found."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join([f"{len(self.problems)} problem(s) with this check-training command:",
                                    *(f"  - {p}" for p in self.problems)]))


@dataclass
class FrameworkRun:
    framework: str
    status: str  # "ok", "failed", "not installed"
    detail: str = ""
    losses: dict[int, float] = field(default_factory=dict)  # step -> the step's training loss
    weights: dict[str, np.ndarray] = field(default_factory=dict)  # canonical, after the last step
    loss_diff: float | None = None  # largest relative difference to torch's loss at the same step
    weight_diff: float | None = None  # largest relative difference to torch's final weights
    worst_weight: str = ""  # the canonical array of weight_diff
    free_diff: float | None = None  # the largest relative difference of a gradient-free array (not held to a bound)
    free_weight: str = ""  # the array of free_diff (GRADIENT_FREE)
    seconds: float = 0.0  # wall time of generating and training the program


@dataclass
class LockstepReport:
    spec_name: str
    steps: int
    runs: dict[str, FrameworkRun]
    floors: list[FrameworkRun] = field(default_factory=list)  # torch again from starts one float32 ulp away
    ranks: int = 1  # processes each program trained on
    one_rank: FrameworkRun | None = None  # with ranks > 1: torch on one process, compared with torch on `ranks`
    loss_tolerance: float = LOSS_TOLERANCE
    weight_tolerance: float = WEIGHT_TOLERANCE

    @property
    def floor(self) -> FrameworkRun | None:
        """The floor samples as one run: each measure the largest over the samples (the loss's and the weights'
        may come from different samples), or the first sample that did not train or was not compared (torch's
        own run failed); None without a floor."""
        if not self.floors:
            return None
        unmeasured = [r for r in self.floors if r.status != "ok" or r.loss_diff is None or r.weight_diff is None]
        if unmeasured:
            r = unmeasured[0]
            return (FrameworkRun(FLOOR, r.status, f"{r.framework}: {r.detail}") if r.status != "ok" else
                    FrameworkRun(FLOOR, NOT_COMPARED, f"{r.framework}: {NOT_COMPARED_WHY}"))
        worst = max(self.floors, key=lambda r: r.weight_diff or 0.0)
        free = [r.free_diff for r in self.floors if r.free_diff is not None]
        return FrameworkRun(FLOOR, "ok", loss_diff=max(r.loss_diff or 0.0 for r in self.floors),
                            weight_diff=worst.weight_diff, worst_weight=worst.worst_weight,
                            free_diff=max(free) if free else None,
                            seconds=sum(r.seconds for r in self.floors))

    @property
    def tolerances(self) -> tuple[float, float]:
        """(loss, weight) bounds `ok` holds the programs to: the targets, or, with a floor, twice the largest
        distance torch parts from itself over its floor samples (starts one float32 ulp away), whichever is
        larger. Where one rounding flips a ReLU or changes a max-pool's pick (the mlp on digits at step 27
        on an AMD EPYC: 1.8e-3 for torch against torch), every program parts by that much on that CPU, and
        a fixed bound would pass or fail by the machine's matmul kernels, not by what the programs compute.
        Several samples, and the largest: whether a run crosses such a kink is chaotic, so one sample's
        spread is luck (mnist_cnn, AdamW, 50 steps: 2.3e-5 to 1.5e-2 over twelve, three of them crossing),
        and a bound that is luck fails or passes a program by the draw; the largest of several is the spread
        float32 rounding of a start can give, which a second program's rounding can as well. It is drawn
        from disturbances of the start only, where a second program rounds differently at every step, and
        can take a branch none of the samples takes (mnist_cnn with SGD: paddle from 4 of 13 starts, torch
        on one thread from 1, torch from starts one ulp away from none of 12; docs/generated-program.md).
        A sample that did not train leaves the targets (the report says so)."""
        loss, weight = self.loss_tolerance, self.weight_tolerance
        floor = self.floor
        if floor is not None and floor.status == "ok" and floor.loss_diff is not None and floor.weight_diff is not None:
            loss, weight = max(loss, FLOOR_FACTOR * floor.loss_diff), max(weight, FLOOR_FACTOR * floor.weight_diff)
        return loss, weight

    @property
    def ok(self) -> bool:
        compared = [r for r in self.runs.values() if r.framework != "torch"]
        if self.one_rank is not None:
            compared.append(self.one_rank)
        loss_tolerance, weight_tolerance = self.tolerances
        return all(r.status == "ok" for r in [*self.runs.values(), *compared]) and all(
            r.loss_diff is not None and r.loss_diff <= loss_tolerance
            and r.weight_diff is not None and r.weight_diff <= weight_tolerance for r in compared)

    def to_dict(self) -> dict[str, Any]:
        one, floor = self.one_rank, self.floor
        return {"spec": self.spec_name, "steps": self.steps, "ranks": self.ranks, "ok": self.ok, "note": SWITCHED_OFF,
                "gradient_free": f"not held to the weight bound: {GRADIENT_FREE_WHY}",
                "loss_tolerance": self.loss_tolerance, "weight_tolerance": self.weight_tolerance,
                "tolerances": {"loss": self.tolerances[0], "weight": self.tolerances[1]},
                "frameworks": {fw: {"status": r.status, "detail": r.detail, "loss_diff": r.loss_diff,
                                    "weight_diff": r.weight_diff, "worst_weight": r.worst_weight,
                                    "gradient_free_diff": r.free_diff, "gradient_free_weight": r.free_weight,
                                    "seconds": round(r.seconds, 1),
                                    "losses": {str(step): loss for step, loss in r.losses.items()}}
                               for fw, r in self.runs.items()},
                "floor": None if floor is None else {"status": floor.status, "detail": floor.detail,
                                                     "loss_diff": floor.loss_diff, "weight_diff": floor.weight_diff,
                                                     "worst_weight": floor.worst_weight,
                                                     "gradient_free_diff": floor.free_diff,
                                                     "samples": len(self.floors)},
                "floor_samples": [{"name": r.framework, "status": r.status, "detail": r.detail,
                                   "loss_diff": r.loss_diff, "weight_diff": r.weight_diff,
                                   "worst_weight": r.worst_weight, "gradient_free_diff": r.free_diff,
                                   "seconds": round(r.seconds, 1)} for r in self.floors],
                "one_rank": None if one is None else {"status": one.status, "detail": one.detail,
                                                      "loss_diff": one.loss_diff, "weight_diff": one.weight_diff,
                                                      "worst_weight": one.worst_weight}}

    def text(self, every: int = 10) -> str:
        """The loss of every `every`-th step per framework, then each framework's largest differences."""
        ok_runs = [r for r in self.runs.values() if r.status == "ok"]
        loss_tolerance, weight_tolerance = self.tolerances
        on = f" on {self.ranks} processes each" if self.ranks > 1 else ""
        lines = [f"{self.spec_name}: {self.steps} steps{on} from the same start weights ({SWITCHED_OFF})", ""]
        steps = sorted({s for r in ok_runs for s in r.losses})
        shown = [s for s in steps if s % every == 0 or s in (steps[0], steps[-1])] if steps else []
        lines.append("step  " + "".join(f"{r.framework:>14}" for r in ok_runs))
        for step in shown:
            lines.append(f"{step:<6}" + "".join(f"{r.losses.get(step, float('nan')):>14.6f}" for r in ok_runs))
        lines.append("")
        for r in self.runs.values():
            if r.status != "ok":
                lines.append(f"{r.framework}: {r.status}: {r.detail}")
            elif r.framework == "torch":
                lines.append(f"torch: the reference ({r.seconds:.0f} s)")
            elif r.loss_diff is None or r.weight_diff is None:
                lines.append(f"{r.framework}: {NOT_COMPARED_WHY}")
            else:
                lines.append(f"{r.framework}: loss within {r.loss_diff:.2e} of torch's (tolerance {loss_tolerance:.2g}), "
                             f"final weights within {r.weight_diff:.2e} ({r.worst_weight}; tolerance "
                             f"{weight_tolerance:.2g}; {r.seconds:.0f} s)")
                if r.free_weight:
                    lines.append(f"  {r.free_weight} within {r.free_diff:.2e}, not held to the bound: {GRADIENT_FREE_WHY}")
        lines += self.floor_text()
        if self.one_rank is not None and self.one_rank.status == "ok":
            lines.append(f"torch on 1 process with the whole global batch: loss within {self.one_rank.loss_diff:.2e} "
                         f"of torch's on {self.ranks}, final weights within {self.one_rank.weight_diff:.2e} "
                         f"({self.one_rank.worst_weight})")
        elif self.one_rank is not None:
            lines.append(f"torch on 1 process: {self.one_rank.status}: {self.one_rank.detail}")
        lines.append("lockstep: " + ("yes" if self.ok else "NO"))
        return "\n".join(lines)

    def floor_text(self) -> list[str]:
        """A line per floor sample, then the floor the bound is drawn from."""
        floor = self.floor
        if floor is None:
            return []
        lines = []
        for r in self.floors:
            if r.status != "ok":
                lines.append(f"{r.framework} (torch one ulp away): {r.status}: {r.detail}")
                continue
            if r.loss_diff is None or r.weight_diff is None:
                lines.append(f"{r.framework} (torch one ulp away): {NOT_COMPARED_WHY}")
                continue
            lines.append(f"{r.framework} (torch from start weights one float32 ulp away): loss within "
                         f"{r.loss_diff:.2e}, final weights within {r.weight_diff:.2e} ({r.worst_weight})")
            if r.free_diff is not None:
                lines.append(f"  gradient-free arrays within {r.free_diff:.2e}, not held to the bound")
        if floor.status == "ok":
            lines.append(f"the float32 floor of this run, the largest over {len(self.floors)} sample(s): loss "
                         f"{floor.loss_diff:.2e}, weights {floor.weight_diff:.2e}; a program within "
                         f"{FLOOR_FACTOR:g}x of it, or of the targets, is in lockstep")
        else:
            lines.append(f"no floor: {floor.detail}; the programs are held to the targets")
        return lines


def check_spec(spec: PipelineSpec, weights: Path) -> PipelineSpec:
    """`spec` as the check trains it: no augmentation, no dropout, fp32, a record every step, no
    checkpoints, torch.compile off and the start weights from `weights`."""
    doc = spec.model_dump(mode="json")
    doc["data"]["augmentation"] = []
    for nodes in [doc["model"]["nodes"], *(block["nodes"] for block in doc["model"].get("blocks", []))]:
        for node in nodes:
            if node["op"] == "Dropout":
                node["params"]["p"] = 0.0
            elif "dropout" in node.get("params", {}):
                node["params"]["dropout"] = 0.0
    training = doc["training"]
    training.update(precision="fp32", log_every_steps=1, init_weights=str(weights), early_stopping={},
                    checkpoint={**training["checkpoint"], "every_steps": None, "every_epoch": False})
    training["performance"] = {**training["performance"], "compile": "off"}
    return PipelineSpec.model_validate(doc)


def ranked_spec(spec: PipelineSpec, ranks: int, batch_size: int) -> PipelineSpec:
    """The check spec `spec` for comparing `ranks` processes with one: batches of `batch_size` per process and
    epochs of RANKED_EPOCH_STEPS full global batches (the epoch order runs on through the next permutation of
    the split), so every global batch on `ranks` processes holds the same samples as one process's batch of
    `ranks` times the size (runtime.epoch_order deals each process every ranks-th sample of the order)."""
    doc = spec.model_dump(mode="json")
    doc["data"]["batch_size"] = batch_size
    doc["training"]["samples_per_epoch"] = ranks * spec.data.batch_size * RANKED_EPOCH_STEPS
    return PipelineSpec.model_validate(doc)


def one_ulp_away(start: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """`start` with every float weight moved one float32 ulp up or down, the signs drawn from `seed`: a start
    as far from `start` as rounding puts a second program's first results. Not every weight up: after a
    ReLU a layer's inputs are all ≥ 0, so moving every weight the same way adds up over a unit's inputs
    (n ulps for n inputs, where signs at random give about √n: 96 times more for mnist_cnn's 9,216-input
    linear layer), a disturbance no second program's rounding makes."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, a in start.items():
        if a.dtype.kind != "f":
            out[name] = a
            continue
        up = rng.random(a.shape) < 0.5
        out[name] = np.where(up, np.nextafter(a, np.inf, dtype=a.dtype), np.nextafter(a, -np.inf, dtype=a.dtype))
    return out


def relative_diff(a: np.ndarray, b: np.ndarray) -> float:
    """‖a − b‖ / ‖b‖ (Euclidean norms over the whole array): the difference relative to the array's size.

    Not elementwise: Adam scales each weight's step by its own gradient's history, so a weight whose
    gradient is float32 noise around 0 takes steps of ±lr with the noise's sign in any two programs;
    such weights are few and carry nothing, and an elementwise measure would report only them."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a64 - b64)) / max(float(np.linalg.norm(b64)), 1e-12)


def comparable(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`weights` as the programs' functions compare: each LSTM's b_ih and b_hh replaced by their sum
    ("…/bias_ih_l0+bias_hh_l0"): Keras's LSTM has one bias, their sum, and reads it back as b_ih = sum,
    b_hh = 0 — the same function, which only the sum compares (a GRU's b_hh is not additive: its n gate
    multiplies it by r); and each attention's packed in_proj_bias split into its query, key and value
    parts ("…/in_proj_bias[key]"), so that the key bias, which the function does not depend on
    (GRADIENT_FREE), is measured apart from the two that it does."""
    out = dict(weights)
    for name, hh in weights.items():
        node, _, array = name.rpartition("/")
        if not array.startswith("weight_hh_l") or hh.ndim != 2 or hh.shape[0] != 4 * hh.shape[1]:
            continue
        suffix = array.removeprefix("weight_hh")
        b_ih, b_hh = f"{node}/bias_ih{suffix}", f"{node}/bias_hh{suffix}"
        if b_ih in out and b_hh in out:
            out[f"{b_ih}+bias_hh{suffix}"] = out.pop(b_ih) + out.pop(b_hh)
    for name, packed in weights.items():
        if name.endswith("in_proj_bias") and packed.ndim == 1 and packed.size % 3 == 0:
            del out[name]
            for part, values in zip(("query", "key", "value"), np.split(packed, 3), strict=True):
                out[f"{name}[{part}]"] = values
    return out


def gradient_free(name: str) -> bool:
    """Whether the comparable array `name` is one the loss does not depend on (GRADIENT_FREE)."""
    return name.endswith(GRADIENT_FREE)


def train_losses(metrics: Path) -> dict[int, float]:
    """step -> loss of each "train" record of a metrics.jsonl."""
    losses = {}
    for line in metrics.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("event") == "train":
            losses[int(record["step"])] = float(record["loss"])
    return losses


def argument_problems(steps: int, ranks: int, frameworks: Sequence[str], floor_samples: int | None) -> list[Problem]:
    """What makes check_training's arguments unable to give a check, each a Problem naming the command's
    option (`floor_samples` None: no floor asked for)."""
    problems = []
    if steps < 1:
        problems.append(Problem("--steps", "no optimizer step to compare", received=str(steps),
                                expected="a whole number of at least 1", fix=f"--steps {DEFAULT_STEPS}"))
    if ranks < 1:
        problems.append(Problem("--ranks", "no process to train on", received=str(ranks),
                                expected="a whole number of at least 1", fix="--ranks 1, or leave it out"))
    if floor_samples is not None and floor_samples < 1:
        problems.append(Problem("--floor-samples", "a floor needs at least one run of torch", received=str(floor_samples),
                                expected="a whole number of at least 1",
                                fix=f"--floor-samples {DEFAULT_FLOOR_SAMPLES}, or leave it out"))
    if "torch" not in frameworks:
        problems.append(Problem("--frameworks", "the check compares against torch", received=" ".join(frameworks),
                                expected="torch among the frameworks", fix=f"--frameworks torch {' '.join(frameworks)}"))
    return problems


def check_training(spec: PipelineSpec, steps: int = DEFAULT_STEPS, frameworks: Sequence[str] = FRAMEWORKS,
                   seed: int = 0, python: str | None = None, timeout: float = RUN_TIMEOUT_S,
                   workdir: str | Path | None = None, floor: bool = False, ranks: int = 1,
                   floor_samples: int = DEFAULT_FLOOR_SAMPLES) -> LockstepReport:
    """Train `spec` for `steps` steps in each framework from the same start and compare against torch.

    With `floor`, torch trains `floor_samples` more times, from the start weights each moved one float32
    ulp up or down (`one_ulp_away`, signs drawn from seeds 1 … floor_samples): how far float32 rounding
    alone carries this run in `steps` steps (training amplifies it; Adam's steps on weights whose
    gradient cancels to rounding noise most of all), the measure of what any second program, even torch
    itself, can hold.

    With `ranks` > 1 every program trains on that many local processes (data-parallel, the spec's batch
    on each), compared with torch's on as many, and torch trains once more on one process with the whole
    global batch (`ranked_spec`): the same from `ranks` processes as from one."""
    problems = argument_problems(steps, ranks, frameworks, floor_samples if floor else None)
    if problems:
        raise LockstepError(problems)
    python = python or sys.executable
    analysis = validate(spec)
    runs: dict[str, FrameworkRun] = {}
    with tempfile.TemporaryDirectory(prefix="flowtrain-lockstep-", dir=workdir) as tmp:
        root = Path(tmp)
        start = random_canonical(analysis, seed)
        np.savez(root / "start.npz", **start)
        checked = check_spec(spec, root / "start.npz")
        batch = spec.data.batch_size
        program = checked if ranks == 1 else ranked_spec(checked, ranks, batch)
        jobs = [(fw, fw, program, ranks) for fw in frameworks]  # (name, framework, spec, processes)
        floor_names = [f"{FLOOR}-{k}" for k in range(1, floor_samples + 1)] if floor else []
        for k, name in enumerate(floor_names, start=1):
            np.savez(root / f"start-ulp-{k}.npz", **one_ulp_away(start, k))
            moved = check_spec(spec, root / f"start-ulp-{k}.npz")
            jobs.append((name, "torch", moved if ranks == 1 else ranked_spec(moved, ranks, batch), ranks))
        if ranks > 1:
            jobs.append((ONE_RANK, "torch", ranked_spec(checked, ranks, ranks * batch), 1))
        folders = train_all(root, jobs, steps, python, timeout, runs)
        for folder, trained in read_trained_many(list(folders), python=python):
            run = runs[folders[folder]]
            if isinstance(trained, TrainedModelError):
                run.status, run.detail = "failed", str(trained)
            else:
                run.weights = trained.weights
    floors = [runs.pop(name) for name in floor_names]
    one_rank = runs.pop(ONE_RANK, None)
    compare({**runs, **{r.framework: r for r in floors}, **({ONE_RANK: one_rank} if one_rank is not None else {})})
    return LockstepReport(spec.name, steps, runs, floors=floors, ranks=ranks, one_rank=one_rank)


def train_all(root: Path, jobs: list[tuple[str, str, PipelineSpec, int]], steps: int, python: str, timeout: float,
              runs: dict[str, FrameworkRun]) -> dict[Path, str]:
    """Generate and train each job's program under `root`, one after another, into `runs`; the folders of
    those that trained."""
    folders = {}
    for name, framework, program_spec, processes in jobs:
        reason = not_installed(framework) if python == sys.executable else None
        if reason is not None:
            runs[name] = FrameworkRun(name, "not installed", reason)
            continue
        folder = root / name
        started = time.monotonic()
        generate(program_spec, framework).write(folder)
        failure = run_program(folder, framework, steps, python, timeout, processes)
        seconds = time.monotonic() - started
        if failure is not None:
            runs[name] = FrameworkRun(name, "failed", failure, seconds=seconds)
            continue
        runs[name] = FrameworkRun(name, "ok", losses=train_losses(folder / "metrics.jsonl"), seconds=seconds)
        folders[folder] = name
    return folders


def compare(runs: dict[str, FrameworkRun]) -> None:
    """Each framework's largest relative loss and weight differences against torch's run."""
    reference = runs.get("torch")
    if reference is None or reference.status != "ok":
        return
    for run in runs.values():
        if run.framework == "torch" or run.status != "ok":
            continue
        missing = sorted(set(reference.losses) ^ set(run.losses))
        if missing:
            run.status, run.detail = "failed", f"its logged steps differ from torch's at steps {missing[:5]}"
            continue
        run.loss_diff = max((abs(run.losses[s] - loss) / max(abs(loss), 1e-12)
                             for s, loss in reference.losses.items()), default=0.0)
        weights, reference_weights = comparable(run.weights), comparable(reference.weights)
        diffs = {name: relative_diff(weights[name], value) for name, value in reference_weights.items()}
        held = {name: d for name, d in diffs.items() if not gradient_free(name)}
        free = {name: d for name, d in diffs.items() if gradient_free(name)}
        run.worst_weight = max(held, key=held.__getitem__, default="")
        run.weight_diff = held.get(run.worst_weight, 0.0)
        run.free_weight = max(free, key=free.__getitem__, default="")
        run.free_diff = free.get(run.free_weight)
