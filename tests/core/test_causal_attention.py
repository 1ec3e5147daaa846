"""``causal: true`` on MultiheadAttention and TransformerEncoderLayer: a position's output does not move
when a later position changes, and does without the flag (onnxruntime on the ONNX export, which the
frameworks' outputs match: tests/frameworks/test_onnx_export.py)."""

from __future__ import annotations

import numpy as np
import pytest

from core.onnx_export import export_onnx
from core.validate import validate
from core.weights import random_canonical
from tests.core.test_onnx_import import run_ort
from tests.op_cases import CASES

CAUSAL = [c for c in CASES if c.params.get("causal")]


@pytest.mark.parametrize("case", CAUSAL, ids=lambda c: c.name)
def test_a_causal_position_reads_no_later_position(case) -> None:  # noqa: ANN001
    x = np.random.default_rng(0).standard_normal((2, *case.shape)).astype(np.float32)
    changed = x.copy()
    changed[:, -1] += np.linspace(-1.0, 1.0, case.shape[1], dtype=np.float32)  # only the last position (not a
    # constant shift, which a LayerNorm first would not see)
    outputs = {}
    for causal in (True, False):
        spec = case.spec()
        doc = spec.model_dump(mode="json")
        next(n for n in doc["model"]["nodes"] if n["id"] == "node")["params"]["causal"] = causal
        spec = type(spec).model_validate(doc)
        analysis = validate(spec)
        model = export_onnx(spec, random_canonical(analysis, seed=2), analysis=analysis)
        outputs[causal] = run_ort(model, x), run_ort(model, changed)
    before, after = outputs[True]
    np.testing.assert_array_equal(before[:, :-1], after[:, :-1])
    assert np.abs(before[:, -1] - after[:, -1]).max() > 1e-3
    unmasked_before, unmasked_after = outputs[False]
    assert np.abs(unmasked_before[:, :-1] - unmasked_after[:, :-1]).max() > 1e-3
