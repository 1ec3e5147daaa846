"""Do the generated programs of all frameworks compute the same function? Run them and compare.

For each spec: the program of every framework that can express the graph is generated into a
temporary folder; random canonical weights are drawn once (:func:`core.weights.random_canonical`)
and random inputs once (token ids for int64 inputs), both saved as .npz; then each framework
runs in its own subprocess (:mod:`core.model_worker`: paddle after tensorflow in one
process crashes), loads the same weights into its own layout and writes its eval-mode outputs.
Outputs are compared pairwise by their maximum absolute difference.

Tolerance: two outputs agree when ``max|a − b| ≤ tolerance · max(1, max|a|)`` — an absolute
bound for outputs of order one, relative for larger ones (float32 sums over deep networks).

BatchNorm in training mode: every program updates the running variance with torch's convention,
the *unbiased* batch variance (n/(n−1) times the biased one), and the running mean/variance with
weight ``momentum`` (torch's 0.1 = Keras/paddle's 0.9). Torch's nn.BatchNorm does this natively;
the Keras template's BatchNorm subclass and the paddle template's batch-norm helper rescale the
batch variance before their moving-average update. :func:`check` verifies it: for graphs with a
BatchNorm (and no Dropout, whose training-mode output is random) every worker also runs one
training-mode forward pass and the running statistics afterwards are compared like outputs.

Frameworks whose mapper refuses the graph are reported as "not expressible: <reason>" (not a
failure: the check compares the frameworks that can express it). A requested framework whose
packages this Python cannot find (``importlib.util.find_spec``, checked before anything runs and
without importing them) is "not installed", naming the missing package; that *is* a failure,
because the check could not do what was asked — leave the framework out (``--frameworks``) to
compare the others.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from core.allowed_env import allowed_environment
from core.codegen import generate
from core.errors import FlowTrainError, SpecError
from core.mapping.base import FRAMEWORKS, unsupported_problems
from core.spec import PipelineSpec
from core.validate import Analysis, validate
from core.weights import random_canonical

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TOLERANCE = 1e-4
WORKER_TIMEOUT_S = 900.0
_TRAIN_UPDATE_OPS = frozenset({"BatchNorm1d", "BatchNorm2d"})
_RANDOM_IN_TRAINING = frozenset({"Dropout", "MultiheadAttention", "TransformerEncoderLayer"})
# The packages a framework's generated model.py imports (Keras runs on its TensorFlow backend).
PACKAGES: dict[str, tuple[str, ...]] = {"torch": ("torch",), "keras": ("keras", "tensorflow"), "paddle": ("paddle",)}


@dataclass
class FrameworkOutcome:
    status: str  # "ok", "not expressible", "not installed", "failed"
    reason: str | None = None
    output: np.ndarray | None = None
    after: dict[str, np.ndarray] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason,
                "output_shape": None if self.output is None else list(self.output.shape)}


@dataclass
class Pair:
    a: str
    b: str
    max_abs_diff: float
    ok: bool
    running_stats_diff: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"a": self.a, "b": self.b, "max_abs_diff": self.max_abs_diff, "ok": self.ok}
        if self.running_stats_diff is not None:
            d["running_stats_diff"] = self.running_stats_diff
        return d


@dataclass
class Report:
    name: str
    frameworks: dict[str, FrameworkOutcome]
    pairs: list[Pair]
    tolerance: float
    inputs: np.ndarray | None = None  # the batch every framework ran
    seed: int = 0  # the weights were random_canonical(analysis, seed)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.pairs) and not any(o.status in ("failed", "not installed")
                                                         for o in self.frameworks.values())

    @property
    def compared(self) -> list[str]:
        return [fw for fw, o in self.frameworks.items() if o.status == "ok"]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tolerance": self.tolerance,
                "frameworks": {fw: o.to_dict() for fw, o in self.frameworks.items()},
                "pairs": [p.to_dict() for p in self.pairs], "ok": self.ok}

    def text(self) -> str:
        lines = [f"{self.name}:"]
        for fw, o in self.frameworks.items():
            lines.append(f"  {fw:<7} {o.status}" + (f": {o.reason}" if o.reason else ""))
        for p in self.pairs:
            extra = "" if p.running_stats_diff is None else f", running stats {p.running_stats_diff:.3g}"
            lines.append(f"  {p.a} vs {p.b}: max abs diff {p.max_abs_diff:.3g}{extra} -> {'ok' if p.ok else 'DIFFERENT'}")
        if len(self.compared) < 2:
            lines.append("  (fewer than two frameworks ran: nothing to compare)")
        lines.append(f"  {'ok' if self.ok else 'NOT EQUIVALENT'} (tolerance {self.tolerance:g})")
        return "\n".join(lines)


def random_inputs(analysis: Analysis, batch: int, seed: int = 1) -> np.ndarray:
    """A batch for the Input node: N(0, 1) floats, or token ids below every Embedding's vocabulary."""
    if analysis.input_id is None:
        raise ValueError("the graph has no Input node")
    tensor = analysis.nodes[analysis.input_id].output
    rng = np.random.default_rng(seed)
    shape = (batch, *tensor.shape)
    if tensor.dtype == "int64":
        vocab = min((n.params["num_embeddings"] for n in analysis.nodes.values() if n.op == "Embedding"), default=10)
        return rng.integers(0, vocab, size=shape, dtype=np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def wants_train_update(analysis: Analysis) -> bool:
    ops = {n.op for n in analysis.nodes.values()}
    return bool(ops & _TRAIN_UPDATE_OPS) and not ops & _RANDOM_IN_TRAINING


def not_installed(framework: str) -> str | None:
    """Why ``framework`` cannot run in this Python (its missing packages), or None when it can."""
    missing = [pkg for pkg in PACKAGES[framework] if importlib.util.find_spec(pkg) is None]
    if not missing:
        return None
    others = " ".join(fw for fw in FRAMEWORKS if fw != framework)
    return (f"{' and '.join(missing)} cannot be found by {sys.executable}: install it, or leave {framework} out "
            f"(--frameworks {others})")


def _not_expressible(analysis: Analysis, framework: str) -> str | None:
    problems = unsupported_problems(analysis, framework)
    if problems:
        return "; ".join(f"node {p.node}: {p.message}" for p in problems)
    return None


def run_worker(framework: str, jobs: list[dict[str, Any]], folder: Path, timeout: float,
               python: str | None = None) -> str | None:
    """Run one framework's jobs in one subprocess of ``python`` (default: this interpreter); None on
    success, else what went wrong."""
    jobs_file = folder / f"jobs-{framework}.json"
    jobs_file.write_text(json.dumps(jobs))
    # CPU float32 everywhere: a GPU's TF32 matrix products alone would exceed the tolerance. The worker
    # imports generated (or a run's) model.py: it gets the allow-listed environment, not the portal's.
    env = {**allowed_environment(), "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2",
           "GLOG_minloglevel": "2"}
    try:
        proc = subprocess.run([python or sys.executable, "-m", "core.model_worker", "--jobs", str(jobs_file)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"the {framework} worker did not finish within {timeout:g} s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
        return f"the {framework} worker exited with {proc.returncode}: " + " | ".join(tail)
    return None


def check_many(specs: dict[str, PipelineSpec], frameworks: Sequence[str] = FRAMEWORKS,
               tolerance: float = DEFAULT_TOLERANCE, batch: int | dict[str, int] = 2, seed: int = 0,
               timeout: float = WORKER_TIMEOUT_S, workdir: str | Path | None = None) -> dict[str, Report]:
    """Check several specs with one subprocess per framework (imports are the slow part)."""
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise FlowTrainError(f"unknown framework {fw!r}; choose from {', '.join(FRAMEWORKS)}")
    missing = {fw: reason for fw in frameworks if (reason := not_installed(fw)) is not None}
    with tempfile.TemporaryDirectory(prefix="flowtrain-equivalence-", dir=workdir) as tmp:
        root = Path(tmp)
        outcomes: dict[str, dict[str, FrameworkOutcome]] = {}
        inputs: dict[str, np.ndarray] = {}
        jobs: dict[str, list[dict[str, Any]]] = {fw: [] for fw in frameworks}
        for i, (name, spec) in enumerate(specs.items()):
            analysis = validate(spec)
            case = root / f"case{i}"
            case.mkdir()
            np.savez(case / "weights.npz", **random_canonical(analysis, seed))
            n = batch.get(name, 2) if isinstance(batch, dict) else batch
            inputs[name] = random_inputs(analysis, n, seed + 1)
            np.savez(case / "inputs.npz", x=inputs[name])
            outcomes[name] = {}
            for fw in frameworks:
                if fw in missing:
                    outcomes[name][fw] = FrameworkOutcome("not installed", missing[fw])
                    continue
                reason = _not_expressible(analysis, fw)
                if reason is None:
                    try:
                        generate(spec, fw, analysis).write(case / fw)
                    except SpecError as err:
                        reason = "; ".join(str(p) for p in err.problems)
                    except Exception as exc:  # noqa: BLE001  (a template bug is this framework's failure)
                        outcomes[name][fw] = FrameworkOutcome("failed", f"generation failed: "
                                                              f"{type(exc).__name__}: {exc}")
                        continue
                if reason is not None:
                    outcomes[name][fw] = FrameworkOutcome("not expressible", reason)
                    continue
                jobs[fw].append({"name": name, "dir": str(case / fw), "weights": str(case / "weights.npz"),
                                 "inputs": str(case / "inputs.npz"), "out": str(case / f"out-{fw}.npz"),
                                 "train_update": wants_train_update(analysis)})
        for fw, fw_jobs in jobs.items():
            if not fw_jobs:
                continue
            failure = run_worker(fw, fw_jobs, root, timeout)
            for job in fw_jobs:
                outcomes[job["name"]][fw] = _collect(job, failure)
        return {name: replace(_compare(name, outcomes[name], frameworks, tolerance), inputs=inputs[name], seed=seed)
                for name in specs}


def check(spec: PipelineSpec, frameworks: Sequence[str] = FRAMEWORKS, tolerance: float = DEFAULT_TOLERANCE,
          batch: int = 2, seed: int = 0, timeout: float = WORKER_TIMEOUT_S) -> Report:
    return check_many({spec.name: spec}, frameworks, tolerance, batch, seed, timeout)[spec.name]


def _collect(job: dict[str, Any], failure: str | None) -> FrameworkOutcome:
    out, error = Path(job["out"]), Path(job["out"] + ".error.txt")
    if error.exists():
        lines = error.read_text().strip().splitlines()
        return FrameworkOutcome("failed", " | ".join(lines[-3:]))
    if not out.exists():
        return FrameworkOutcome("failed", failure or "the worker wrote no output")
    with np.load(out) as data:
        after = {k.removeprefix("after/"): data[k] for k in data.files if k.startswith("after/")}
        return FrameworkOutcome("ok", None, data["output"], after)


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return math.inf
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _compare(name: str, outcomes: dict[str, FrameworkOutcome], frameworks: Iterable[str],
             tolerance: float) -> Report:
    ran = [fw for fw in frameworks if outcomes[fw].status == "ok"]
    pairs = []
    for i, a in enumerate(ran):
        for b in ran[i + 1:]:
            oa, ob = outcomes[a], outcomes[b]
            diff = _max_diff(oa.output, ob.output)
            scale = max(1.0, float(np.max(np.abs(oa.output))) if oa.output.size else 1.0)
            ok = diff <= tolerance * scale
            stats_diff = None
            keys = [k for k in oa.after if k.endswith(("running_mean", "running_var"))]
            if keys:
                stats_diff = max(_max_diff(oa.after[k], ob.after.get(k, np.empty(0))) for k in keys)
                ok = ok and stats_diff <= tolerance
            pairs.append(Pair(a, b, diff, ok, stats_diff))
    return Report(name, dict(outcomes), pairs, tolerance)


# --------------------------------------------------------------------------- zoo graphs to check


# Zoo templates at sizes small enough to run three frameworks on a CPU: ImageNet networks whose
# only size-dependent op is a global pool take 64×64 images; VGG and AlexNet keep 224×224 (their
# adaptive pools must divide evenly in Keras/paddle) and batch 1; text models take 16 tokens.
SMALL_INPUTS: dict[str, list[int]] = {"resnet18": [3, 64, 64], "resnet50": [3, 64, 64],
                                      "mobilenet_v2": [3, 64, 64], "lstm_text_classifier": [16],
                                      "transformer_text_classifier": [16], "unet": [3, 32, 32]}
BATCH_ONE = ("vgg16", "alexnet")


def small_zoo_spec(name: str) -> PipelineSpec:
    from core import zoo

    spec = zoo.template(name)
    if name in SMALL_INPUTS:
        doc = spec.model_dump(mode="json")
        doc["data"]["input_shape"] = SMALL_INPUTS[name]
        spec = PipelineSpec.model_validate(doc)
    return spec


def small_batch(name: str) -> int:
    return 1 if name in BATCH_ONE else 2

