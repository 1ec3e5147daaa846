"""Run a finished run's ``model.onnx`` on new inputs, with the run's own preprocessing.

:func:`prepare_inputs` preprocesses the inputs in a subprocess with the run's generated ``data.py``
(:mod:`core.predict_worker`: the statistics fitted on the training split, the same code as
training; batch by batch into a memory-mapped file); :func:`predict` runs the model on onnxruntime in batches (no framework); the results are
class names and probabilities (classification, top K) or values (regression), written as a table,
JSON lines or CSV (:func:`write_predictions`).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import CommandError
from core.spec import PipelineSpec

WORKER = Path(__file__).with_name("predict_worker.py")
WORKER_TIMEOUT_S = 1800.0


@dataclass
class Inputs:
    """Preprocessed samples, one name each, and what the run's data layer said about them."""

    x: np.ndarray
    names: list[str]
    task: str
    class_names: list[str] | None
    fitted: list[str] = field(default_factory=list)  # preprocessing steps whose statistics were fitted
    labels: list[Any] | None = None  # the true targets, for the run's own validation samples
    sizes: list[tuple[int, int]] | None = None  # segmentation: (height, width) each sample's mask is written at
    masks: list[str] | None = None  # segmentation: each sample's mask file, relative to the output folder


@dataclass
class Prediction:
    """One sample's result: top classes with probabilities, or regression values."""

    name: str
    classes: list[tuple[int, str, float]] | None = None  # (index, name, probability), best first
    values: list[float] | None = None


def prepare_inputs(run_dir: Path, inputs: list[Path], workdir: Path, *, batch: int = 256,
                   python: str | None = None, timeout: float = WORKER_TIMEOUT_S,
                   validation: tuple[int, int] | None = None) -> Inputs:
    """Preprocess ``inputs`` as the run in ``run_dir`` preprocessed its training data, ``batch``
    samples at a time, into ``workdir`` (the returned ``x`` is memory-mapped from there). With
    ``validation`` (start, count) instead: the run's own validation samples from ``start``, as
    training preprocessed them, with their ``labels``.

    The worker runs with ``python`` (default: this interpreter; it needs numpy, and pillow for
    images, scikit-learn for built-in datasets). A bad input is a :class:`CommandError` with the
    worker's message."""
    chosen = [f"--validation={validation[0]}:{validation[1]}"] if validation is not None else list(map(str, inputs))
    cmd = [python or sys.executable, str(WORKER), str(run_dir), str(workdir.absolute()), str(batch), *chosen]
    try:
        # in the caller's folder: the inputs are paths as the user gave them, relative ones too
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CommandError(f"preprocessing the inputs took over {timeout:.0f} s; predict fewer inputs at once",
                           exit_code=1) from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        message = lines[-1].removeprefix("error: ") if lines else f"exit code {done.returncode}"
        if done.returncode == 2:
            raise CommandError(message)
        raise CommandError(f"preprocessing the inputs with the run's data.py failed: {message}", exit_code=1)
    names = json.loads((workdir / "names.json").read_text(encoding="utf-8"))
    meta = json.loads((workdir / "meta.json").read_text(encoding="utf-8"))
    x = np.load(workdir / "x.npy", mmap_mode="r") if names else np.zeros((0,), np.float32)
    labels_file = workdir / "labels.json"
    labels = json.loads(labels_file.read_text(encoding="utf-8")) if labels_file.is_file() else None
    sizes = _optional_json(workdir / "sizes.json")
    return Inputs(x=x, names=names, task=meta["task"], class_names=meta["class_names"], fitted=meta["fitted"],
                  labels=labels, sizes=[(int(h), int(w)) for h, w in sizes] if sizes is not None else None,
                  masks=_optional_json(workdir / "masks.json"))


def _optional_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


ACTIVATIONS = ("softmax", "sigmoid", "none")
PROBABILITY_OPS = ("Softmax",)


def activation_of(spec: PipelineSpec) -> str:
    """How the model's outputs become probabilities: none when a Softmax feeds the Output, else by
    the training loss (sigmoid for ``bce_with_logits``, softmax for cross-entropy's logits)."""
    ops = {n.id: n.op for n in spec.model.nodes}
    outputs = [n.id for n in spec.model.nodes if n.op == "Output"]
    feeding = [e.source for e in spec.model.edges if e.target in outputs]
    if feeding and all(ops.get(s) in PROBABILITY_OPS for s in feeding):
        return "none"
    return "sigmoid" if spec.training.loss == "bce_with_logits" else "softmax"


def predict(model: Path, inputs: Inputs, *, top: int = 3, batch: int = 256,
            activation: str = "softmax") -> list[Prediction]:
    """Run ``model`` (ONNX) on ``inputs`` in batches of ``batch``. Classification: ``activation``
    turns the model's outputs into probabilities: ``softmax`` (logits of a cross-entropy loss),
    ``sigmoid`` (one logit per class, or a single logit of class 1, of ``bce_with_logits``) or
    ``none`` (the model ends in a Softmax)."""
    return interpret(onnx_outputs(model, inputs, batch=batch), inputs, top=top, activation=activation)


def onnx_outputs(model: Path, inputs: Inputs, *, batch: int = 256) -> np.ndarray:
    """The raw outputs (logits) of ``model`` (ONNX, on onnxruntime) for ``inputs``, ``batch`` at a time."""
    outputs = list(onnx_batches(model, inputs, batch=batch))
    return np.concatenate(outputs) if outputs else np.zeros((0,), np.float32)


def onnx_batches(model: Path, inputs: Inputs, *, batch: int = 256) -> Iterator[np.ndarray]:
    """:func:`onnx_outputs` one batch at a time, for outputs too large to hold at once (masks)."""
    run = onnx_function(model)
    for i in range(0, len(inputs.x), batch):
        yield run(inputs.x[i:i + batch])


def onnx_function(model: Path) -> Callable[[np.ndarray], np.ndarray]:
    """``model`` (ONNX) loaded once on onnxruntime, as a function of a batch of inputs (cast to the
    model's declared input type) returning its first output."""
    import onnxruntime as ort  # imported only by the commands that run a model
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

    unreadable = (ort_errors.InvalidProtobuf, ort_errors.InvalidGraph, ort_errors.Fail, ort_errors.NoSuchFile,
                  ort_errors.NotImplemented)
    try:
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    except unreadable as exc:
        raise CommandError(f"{model}: onnxruntime cannot load this model ({exc}); write it again with "
                           "`python -m flowtrain export-onnx RUN --out MODEL.onnx`", exit_code=1) from None
    [declared] = session.get_inputs()
    expected = declared.type.removeprefix("tensor(").removesuffix(")")
    dtype = {"float": np.float32, "int64": np.int64}.get(expected, np.float32)

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(session.run(None, {declared.name: np.ascontiguousarray(x, dtype=dtype)})[0])

    return run


def interpret(outputs: np.ndarray, inputs: Inputs, *, top: int = 3, activation: str = "softmax") -> list[Prediction]:
    """The model's raw ``outputs`` for ``inputs`` (one row per sample, from any engine) as predictions."""
    if not inputs.names:
        return []
    out = np.asarray(outputs, np.float64)
    if inputs.task == "classification":
        return _classes(_probabilities(out, activation), inputs.names, inputs.class_names, top)
    return [Prediction(n, values=[float(v) for v in row.reshape(-1)]) for n, row in zip(inputs.names, out, strict=True)]


def _probabilities(out: np.ndarray, activation: str) -> np.ndarray:
    out = out.reshape(len(out), -1)
    if activation == "sigmoid":
        p = 1.0 / (1.0 + np.exp(-out))
        return np.concatenate([1.0 - p, p], axis=1) if p.shape[1] == 1 else p  # one logit: class 1
    if activation == "softmax":
        shifted = np.exp(out - out.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)
    return out


def _classes(out: np.ndarray, names: list[str], class_names: list[str] | None, top: int) -> list[Prediction]:
    order = np.argsort(-out, axis=1, kind="stable")[:, :top]
    label = (lambda k: class_names[k]) if class_names else str
    return [Prediction(n, classes=[(int(k), label(int(k)), float(p[k])) for k in ks])
            for n, p, ks in zip(names, out, order, strict=True)]


# --------------------------------------------------------------------------- output


def as_records(results: list[Prediction]) -> list[dict[str, Any]]:
    """One JSON-ready dict per sample."""
    records = []
    for r in results:
        if r.classes is not None:
            records.append({"input": r.name, "class": r.classes[0][1], "probability": r.classes[0][2],
                            "top": [{"index": k, "class": c, "probability": p} for k, c, p in r.classes]})
        else:
            records.append({"input": r.name, "value": r.values[0] if len(r.values or []) == 1 else r.values})
    return records


def as_rows(results: list[Prediction]) -> tuple[list[str], list[list[str]]]:
    """A header and one row per sample: class and probability per rank, or the values."""
    if not results:
        return ["input"], []
    if results[0].classes is not None:
        k = len(results[0].classes)
        header = ["input"] + [f"{what}_{i + 1}" for i in range(k) for what in ("class", "probability")]
        rows = [[r.name] + [x for _, c, p in r.classes for x in (c, f"{p:.6f}")] for r in results]
    else:
        n = len(results[0].values or [])
        header = ["input", "value"] if n == 1 else ["input"] + [f"value_{i}" for i in range(n)]
        rows = [[r.name] + [f"{v:.6g}" for v in r.values or []] for r in results]
    return header, rows


def write_predictions(results: list[Prediction], out: Path) -> None:
    """``out`` by its extension: ``.jsonl`` (one JSON object per sample) or ``.csv``."""
    suffix = out.suffix.lower()
    if suffix == ".jsonl":
        text = "".join(json.dumps(r) + "\n" for r in as_records(results))
    elif suffix == ".csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        header, rows = as_rows(results)
        writer.writerow(header)
        writer.writerows(rows)
        text = buffer.getvalue()
    else:
        raise CommandError(f"--out {out}: unknown kind of output file; name it .jsonl or .csv")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"--out {out}: cannot write the file ({exc.strerror})", exit_code=1) from exc
