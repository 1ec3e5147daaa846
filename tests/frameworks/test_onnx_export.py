"""ONNX export against the frameworks: onnxruntime on the export of a graph's random canonical
weights gives each framework's outputs for the same weights and inputs, within 1e-4 (relative
above 1, as the equivalence check), for every case of the op catalogue and the zoo templates.

The frameworks' outputs come from the session fixtures the equivalence tests use
(tests/frameworks/conftest.py): no framework runs a second time for these tests.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from core.equivalence import Report, small_zoo_spec
from core.mapping.base import FRAMEWORKS
from core.onnx_export import export_onnx
from core.spec import PipelineSpec
from core.validate import validate
from core.weights import random_canonical
from tests.frameworks.groups import ONE_OP, TOLERANCE, ZOO_SMALL

pytestmark = pytest.mark.frameworks


def onnx_output(spec: PipelineSpec, report: Report) -> np.ndarray:
    analysis = validate(spec)
    model = export_onnx(spec, random_canonical(analysis, report.seed), analysis=analysis)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(["output"], {"input": report.inputs})[0]


def assert_matches_every_framework(spec: PipelineSpec, report: Report) -> dict[str, float]:
    assert report.inputs is not None
    got = onnx_output(spec, report)
    diffs = {}
    for fw in FRAMEWORKS:
        outcome = report.frameworks[fw]
        assert outcome.status == "ok" and outcome.output is not None, f"{fw}: {outcome.status} {outcome.reason}"
        assert got.shape == outcome.output.shape, fw
        diffs[fw] = float(np.max(np.abs(got.astype(np.float64) - outcome.output))) if got.size else 0.0
        scale = max(1.0, float(np.max(np.abs(outcome.output))) if outcome.output.size else 1.0)
        assert diffs[fw] <= TOLERANCE * scale, f"{spec.name}: onnxruntime vs {fw}: max abs diff {diffs[fw]:.3g}"
    return diffs


@pytest.mark.parametrize("name", sorted(ONE_OP))
def test_export_of_each_op_case_matches_every_framework(name: str, one_op_reports: dict[str, Report]) -> None:
    assert_matches_every_framework(ONE_OP[name], one_op_reports[name])


@pytest.mark.parametrize("name", ZOO_SMALL)
def test_export_of_each_zoo_template_matches_every_framework(name: str, zoo_reports: dict[str, Report]) -> None:
    assert_matches_every_framework(small_zoo_spec(name), zoo_reports[name])
