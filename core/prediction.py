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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import CommandError

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


@dataclass
class Prediction:
    """One sample's result: top classes with probabilities, or regression values."""

    name: str
    classes: list[tuple[int, str, float]] | None = None  # (index, name, probability), best first
    values: list[float] | None = None


def prepare_inputs(run_dir: Path, inputs: list[Path], workdir: Path, *, batch: int = 256,
                   python: str | None = None, timeout: float = WORKER_TIMEOUT_S) -> Inputs:
    """Preprocess ``inputs`` as the run in ``run_dir`` preprocessed its training data, ``batch``
    samples at a time, into ``workdir`` (the returned ``x`` is memory-mapped from there).

    The worker runs with ``python`` (default: this interpreter; it needs numpy, and pillow for
    images, scikit-learn for built-in datasets). A bad input is a :class:`CommandError` with the
    worker's message."""
    cmd = [python or sys.executable, str(WORKER), str(run_dir), str(workdir), str(batch), *map(str, inputs)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
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
    return Inputs(x=x, names=names, task=meta["task"], class_names=meta["class_names"], fitted=meta["fitted"])


ACTIVATIONS = ("softmax", "sigmoid", "none")


def predict(model: Path, inputs: Inputs, *, top: int = 3, batch: int = 256,
            activation: str = "softmax") -> list[Prediction]:
    """Run ``model`` (ONNX) on ``inputs`` in batches of ``batch``. Classification: ``activation``
    turns the model's outputs into probabilities: ``softmax`` (logits of a cross-entropy loss),
    ``sigmoid`` (one logit per class, or a single logit of class 1, of ``bce_with_logits``) or
    ``none`` (the model ends in a Softmax)."""
    import onnxruntime as ort  # imported only by this command

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    [declared] = session.get_inputs()
    expected = declared.type.removeprefix("tensor(").removesuffix(")")
    dtype = {"float": np.float32, "int64": np.int64}.get(expected, np.float32)
    results: list[Prediction] = []
    for start in range(0, len(inputs.x), batch):
        chunk = np.ascontiguousarray(inputs.x[start:start + batch], dtype=dtype)
        out = np.asarray(session.run(None, {declared.name: chunk})[0], np.float64)
        names = inputs.names[start:start + batch]
        if inputs.task == "classification":
            results += _classes(_probabilities(out, activation), names, inputs.class_names, top)
        else:
            results += [Prediction(n, values=[float(v) for v in row.reshape(-1)]) for n, row in zip(names, out, strict=True)]
    return results


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
