""":func:`core.prediction.predict` on a real ONNX model (exported from a spec with seeded random
weights, no framework) and real onnxruntime: batches, the three ways outputs become probabilities,
regression values, and the two output files. Predict on a trained run: tests/cli/test_predict.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from core.errors import CommandError
from core.onnx_export import export_onnx, save_onnx
from core.prediction import Inputs, predict, write_predictions
from core.validate import validate
from core.weights import random_canonical
from tests.op_cases import flatten_linear_spec


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = flatten_linear_spec()  # (2, 6, 7) -> 5 outputs
    analysis = validate(spec)
    return save_onnx(export_onnx(spec, random_canonical(analysis, 3), analysis=analysis),
                     tmp_path_factory.mktemp("prediction") / "model.onnx")


def _inputs(task: str, n: int = 7, names: list[str] | None = None) -> Inputs:
    x = np.random.default_rng(0).normal(size=(n, 2, 6, 7)).astype(np.float32)
    return Inputs(x=x, names=[f"s{i}" for i in range(n)], task=task, class_names=names)


def _outputs(model: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0].astype(np.float64)


def test_softmax_top_k_in_batches_matches_the_model_run_at_once(model: Path) -> None:
    inputs = _inputs("classification", names=list("abcde"))
    results = predict(model, inputs, top=2, batch=3, activation="softmax")
    logits = _outputs(model, inputs.x)
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert [r.name for r in results] == inputs.names
    for r, p in zip(results, expected, strict=True):
        best = np.argsort(-p)[:2]
        assert [k for k, _, _ in r.classes] == best.tolist()
        assert [c for _, c, _ in r.classes] == ["abcde"[k] for k in best]
        assert [q for _, _, q in r.classes] == pytest.approx(p[best].tolist(), rel=1e-5)


def test_sigmoid_and_softmax_ending_models_and_regression(model: Path) -> None:
    inputs = _inputs("classification")
    logits = _outputs(model, inputs.x)
    sigmoid = predict(model, inputs, top=5, activation="sigmoid")
    assert sigmoid[0].classes[0][2] == pytest.approx(1 / (1 + np.exp(-logits[0].max())), rel=1e-5)
    raw = predict(model, inputs, top=1, activation="none")
    assert [r.classes[0][2] for r in raw] == pytest.approx(logits.max(axis=1).tolist(), rel=1e-5)
    assert raw[0].classes[0][1] == str(int(logits[0].argmax()))  # no class names: the index
    values = predict(model, _inputs("regression"), batch=4)
    assert [r.values for r in values] == [pytest.approx(row.tolist(), rel=1e-5) for row in logits]


def test_output_files_follow_the_extension(model: Path, tmp_path: Path) -> None:
    results = predict(model, _inputs("classification", n=2), top=2)
    write_predictions(results, tmp_path / "p.jsonl")
    records = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["input"] for r in records] == ["s0", "s1"] and records[0]["class"] == records[0]["top"][0]["class"]
    write_predictions(results, tmp_path / "p.csv")
    rows = list(csv.reader(open(tmp_path / "p.csv")))
    assert rows[0] == ["input", "class_1", "probability_1", "class_2", "probability_2"] and len(rows) == 3
    assert rows[1][1] == records[0]["class"] and float(rows[1][2]) == pytest.approx(records[0]["probability"], abs=1e-6)
    values = predict(model, _inputs("regression", n=1))
    write_predictions(values, tmp_path / "v.csv")
    assert next(csv.reader(open(tmp_path / "v.csv"))) == ["input"] + [f"value_{i}" for i in range(5)]
    with pytest.raises(CommandError, match="name it .jsonl or .csv"):
        write_predictions(results, tmp_path / "p.txt")
