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
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.codegen import generate
from core.equivalence import not_installed
from core.errors import FlowTrainError
from core.frameworks import FRAMEWORKS
from core.spec import PipelineSpec
from core.trained import TrainedModelError, read_trained_many
from core.validate import validate
from core.weights import random_canonical

DEFAULT_STEPS = 50
LOSS_TOLERANCE = 1e-4  # relative, at every step
WEIGHT_TOLERANCE = 1e-3  # relative (‖difference‖ / ‖torch's‖, per array), after the last step
RUN_TIMEOUT_S = 1800
FLOOR = "torch-1ulp"  # the floor run's name (check_training(floor=True))
SWITCHED_OFF = "augmentation and dropout are switched off for the check; fp32 on the CPU"


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


@dataclass
class LockstepReport:
    spec_name: str
    steps: int
    runs: dict[str, FrameworkRun]
    floor: FrameworkRun | None = None  # torch again, from the start weights moved by one float32 ulp
    loss_tolerance: float = LOSS_TOLERANCE
    weight_tolerance: float = WEIGHT_TOLERANCE

    @property
    def ok(self) -> bool:
        compared = [r for r in self.runs.values() if r.framework != "torch"]
        return all(r.status == "ok" for r in self.runs.values()) and all(
            r.loss_diff is not None and r.loss_diff <= self.loss_tolerance
            and r.weight_diff is not None and r.weight_diff <= self.weight_tolerance for r in compared)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec_name, "steps": self.steps, "ok": self.ok, "note": SWITCHED_OFF,
                "loss_tolerance": self.loss_tolerance, "weight_tolerance": self.weight_tolerance,
                "frameworks": {fw: {"status": r.status, "detail": r.detail, "loss_diff": r.loss_diff,
                                    "weight_diff": r.weight_diff, "worst_weight": r.worst_weight,
                                    "losses": {str(step): loss for step, loss in r.losses.items()}}
                               for fw, r in self.runs.items()},
                "floor": None if self.floor is None else {"status": self.floor.status, "detail": self.floor.detail,
                                                          "loss_diff": self.floor.loss_diff,
                                                          "weight_diff": self.floor.weight_diff}}

    def text(self, every: int = 10) -> str:
        """The loss of every `every`-th step per framework, then each framework's largest differences."""
        ok_runs = [r for r in self.runs.values() if r.status == "ok"]
        lines = [f"{self.spec_name}: {self.steps} steps from the same start weights ({SWITCHED_OFF})", ""]
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
                lines.append("torch: the reference")
            else:
                lines.append(f"{r.framework}: loss within {r.loss_diff:.2e} of torch's (tolerance {self.loss_tolerance:g}), "
                             f"final weights within {r.weight_diff:.2e} ({r.worst_weight}; tolerance "
                             f"{self.weight_tolerance:g})")
        if self.floor is not None and self.floor.status == "ok":
            lines.append(f"torch from start weights one float32 ulp away: loss within {self.floor.loss_diff:.2e}, "
                         f"final weights within {self.floor.weight_diff:.2e} (the float32 floor of this run)")
        elif self.floor is not None:
            lines.append(f"torch one ulp away: {self.floor.status}: {self.floor.detail}")
        lines.append("lockstep: " + ("yes" if self.ok else "NO"))
        return "\n".join(lines)


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


def relative_diff(a: np.ndarray, b: np.ndarray) -> float:
    """‖a − b‖ / ‖b‖ (Euclidean norms over the whole array): the difference relative to the array's size.

    Not elementwise: Adam scales each weight's step by its own gradient's history, so a weight whose
    gradient is float32 noise around 0 takes steps of ±lr with the noise's sign in any two programs;
    such weights are few and carry nothing, and an elementwise measure would report only them."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a64 - b64)) / max(float(np.linalg.norm(b64)), 1e-12)


def comparable(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`weights` with each LSTM's b_ih and b_hh replaced by their sum ("…/bias_ih_l0+bias_hh_l0"): Keras's
    LSTM has one bias, their sum, and reads it back as b_ih = sum, b_hh = 0 — the same function, which
    only the sum compares. (A GRU's b_hh is not additive: its n gate multiplies it by r.)"""
    out = dict(weights)
    for name, hh in weights.items():
        node, _, array = name.rpartition("/")
        if not array.startswith("weight_hh_l") or hh.ndim != 2 or hh.shape[0] != 4 * hh.shape[1]:
            continue
        suffix = array.removeprefix("weight_hh")
        b_ih, b_hh = f"{node}/bias_ih{suffix}", f"{node}/bias_hh{suffix}"
        if b_ih in out and b_hh in out:
            out[f"{b_ih}+bias_hh{suffix}"] = out.pop(b_ih) + out.pop(b_hh)
    return out


def train_losses(metrics: Path) -> dict[int, float]:
    """step -> loss of each "train" record of a metrics.jsonl."""
    losses = {}
    for line in metrics.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("event") == "train":
            losses[int(record["step"])] = float(record["loss"])
    return losses


def run_program(folder: Path, steps: int, python: str, timeout: float) -> str | None:
    """Train the program in `folder` for `steps` optimizer steps on the CPU; None, or what went wrong."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "3",
           "GLOG_minloglevel": "2", "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run([python, "train.py", "--max-steps", str(steps), "--resume", "never"], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"train.py did not finish within {timeout:g} s"
    if proc.returncode != 0:
        return f"train.py exited with {proc.returncode}: " + " | ".join(proc.stderr.strip().splitlines()[-5:])
    return None


def check_training(spec: PipelineSpec, steps: int = DEFAULT_STEPS, frameworks: Sequence[str] = FRAMEWORKS,
                   seed: int = 0, python: str | None = None, timeout: float = RUN_TIMEOUT_S,
                   workdir: str | Path | None = None, floor: bool = False) -> LockstepReport:
    """Train `spec` for `steps` steps in each framework from the same start and compare against torch.

    With `floor`, torch trains a second time from the start weights each moved by one float32 ulp: how
    far float32 rounding alone carries this run in `steps` steps (training amplifies it; Adam's
    steps on weights whose gradient cancels to rounding noise most of all), the measure of what any
    second program, even torch itself, can hold."""
    if steps < 1:
        raise FlowTrainError(f"steps must be at least 1, got {steps}")
    if "torch" not in frameworks:
        raise FlowTrainError("the check compares against torch: include it in the frameworks")
    python = python or sys.executable
    analysis = validate(spec)
    runs: dict[str, FrameworkRun] = {}
    with tempfile.TemporaryDirectory(prefix="flowtrain-lockstep-", dir=workdir) as tmp:
        root = Path(tmp)
        start = random_canonical(analysis, seed)
        np.savez(root / "start.npz", **start)
        checked = check_spec(spec, root / "start.npz")
        folders = {}
        jobs = [(fw, checked) for fw in frameworks]
        if floor:
            np.savez(root / "start-ulp.npz", **{name: np.nextafter(a, np.inf, dtype=a.dtype)
                                                if a.dtype.kind == "f" else a for name, a in start.items()})
            jobs.append((FLOOR, check_spec(spec, root / "start-ulp.npz")))
        for fw, program_spec in jobs:
            framework = "torch" if fw == FLOOR else fw
            reason = not_installed(framework) if python == sys.executable else None
            if reason is not None:
                runs[fw] = FrameworkRun(fw, "not installed", reason)
                continue
            folder = root / fw
            generate(program_spec, framework).write(folder)
            failure = run_program(folder, steps, python, timeout)
            if failure is not None:
                runs[fw] = FrameworkRun(fw, "failed", failure)
                continue
            runs[fw] = FrameworkRun(fw, "ok", losses=train_losses(folder / "metrics.jsonl"))
            folders[folder] = fw
        for folder, trained in read_trained_many(list(folders), python=python):
            run = runs[folders[folder]]
            if isinstance(trained, TrainedModelError):
                run.status, run.detail = "failed", str(trained)
            else:
                run.weights = trained.weights
    floor_run = runs.pop(FLOOR, None)
    compare(runs if floor_run is None else {**runs, FLOOR: floor_run})
    return LockstepReport(spec.name, steps, runs, floor=floor_run)


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
        run.worst_weight = max(diffs, key=diffs.__getitem__, default="")
        run.weight_diff = diffs.get(run.worst_weight, 0.0)
