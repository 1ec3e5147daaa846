"""Upsample through ONNX: every case exports as Resize and imports back as the same op and parameters,
onnxruntime computing the same on both files; Resize written by sizes or with half-pixel nearest rounding
imports too, and a factor that is no integer is refused saying what would import."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from core.errors import SpecError
from core.onnx_export import export_onnx
from core.onnx_import import import_onnx
from core.validate import validate
from tests.core.test_onnx_import import run_ort
from tests.op_cases import CASES, OpCase

UPSAMPLE = [c for c in CASES if c.op == "Upsample"]


@pytest.mark.parametrize("case", UPSAMPLE, ids=lambda c: c.name)
def test_upsample_round_trips_through_resize(case: OpCase) -> None:
    spec = case.spec()
    analysis = validate(spec)
    exported = export_onnx(spec, {}, analysis=analysis)
    back = import_onnx(exported).spec
    [node] = [n for n in back.model.nodes if n.op not in ("Input", "Output")]
    assert node.op == "Upsample" and validate(back).nodes[node.id].params == analysis.nodes["node"].params
    again = export_onnx(back, {}, analysis=validate(back))
    x = np.random.default_rng(0).standard_normal((2, *case.shape)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(exported, x), atol=0, rtol=0)


def _resize(inputs: list[str], inits: dict[str, np.ndarray], **attrs: object):  # noqa: ANN202
    graph = helper.make_graph(
        [helper.make_node("Resize", inputs, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("rounding", ["round_prefer_floor", "round_prefer_ceil"])
def test_half_pixel_nearest_by_sizes_is_an_integer_upsample(rounding: str) -> None:
    model = _resize(["x", "", "", "sizes"], {"sizes": np.array([1, 2, 9, 8], np.int64)}, mode="nearest",
                    coordinate_transformation_mode="half_pixel", nearest_mode=rounding)
    result = import_onnx(model)
    [node] = [n for n in result.spec.model.nodes if n.op == "Upsample"]
    assert validate(result.spec).nodes[node.id].params["scale_factor"] == (3, 2)
    again = export_onnx(result.spec, {}, analysis=validate(result.spec))
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(model, x), atol=0, rtol=0)


def test_a_fractional_factor_and_a_rounding_that_shifts_pixels_are_refused() -> None:
    fractional = _resize(["x", "", "scales"], {"scales": np.array([1, 1, 1.5, 2], np.float32)}, mode="linear")
    shifted = _resize(["x", "", "scales"], {"scales": np.array([1, 1, 2, 2], np.float32)}, mode="nearest",
                      coordinate_transformation_mode="half_pixel", nearest_mode="floor")
    for model, said in ((fractional, "by [1.0, 1.0, 1.5, 2.0]"), (shifted, "half_pixel coordinates and floor")):
        with pytest.raises(SpecError) as err:
            import_onnx(model)
        [problem] = err.value.problems
        assert problem.location == "onnx.nodes[y]" and said in problem.message
