"""CropConcat through ONNX: every case exports as Slices and a Concat and imports back as CropConcat (a
Concat where no input is cropped),
onnxruntime computing the same on both files; a crop off the centre is refused saying what would import."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from core.errors import SpecError
from core.onnx_export import export_onnx
from core.onnx_import import import_onnx
from core.validate import validate
from core.weights import random_canonical
from tests.core.test_onnx_import import run_ort
from tests.op_cases import CASES, OpCase

CROP_CONCAT = [c for c in CASES if c.op == "CropConcat"]


@pytest.mark.parametrize("case", CROP_CONCAT, ids=lambda c: c.name)
def test_crop_concat_round_trips_through_slice_and_concat(case: OpCase) -> None:
    spec = case.spec()
    analysis = validate(spec)
    exported = export_onnx(spec, random_canonical(analysis), analysis=analysis)
    slices = [n.op_type for n in exported.graph.node].count("Slice")
    assert slices == sum(s[1:] != analysis.nodes["node"].output.shape[1:] for s in case.input_shapes)
    result = import_onnx(exported)
    back = result.spec
    assert [n.op for n in back.model.nodes].count("CropConcat" if slices else "Concat") == 1  # no crop: a Concat
    again = export_onnx(back, result.weights, analysis=validate(back))
    x = np.random.default_rng(0).standard_normal((2, *case.shape)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(exported, x), atol=1e-6, rtol=0)


def test_a_crop_off_the_centre_is_refused() -> None:
    inits = {"starts": np.array([0, 0], np.int64), "ends": np.array([4, 4], np.int64),
             "axes": np.array([2, 3], np.int64)}
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                                                                  strides=[2, 2]),
         helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["c"]),
         helper.make_node("Concat", ["c", "p"], ["y"], axis=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(SpecError) as err:
        import_onnx(model)
    [problem] = err.value.problems
    assert "cropped to (4, 4) by ((0, 4), (0, 4))" in problem.message and "around its centre" in problem.expected
