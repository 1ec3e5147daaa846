"""ONNX export and import of the vision-transformer ops (PatchEmbed, ClassToken, PositionalEmbedding,
SequencePool 'first'): a small ViT front and head goes out and comes back as the same ops with the same
weights, and onnxruntime computes the same on both files; the patterns they are written in import
from hand-written graphs too, and what is not one of them is imported as before or refused."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from core.errors import SpecError
from core.onnx_export import export_onnx
from core.onnx_import import import_onnx
from core.validate import validate
from core.weights import random_canonical
from core.zoo.builder import GraphBuilder
from tests.core.test_onnx_import import run_ort


def _vit_front(patch: int | list[int] = 4) -> GraphBuilder:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.add("PatchEmbed", x, id="patches", patch_size=patch, embed_dim=6)
    x = g.chain(x, ("ClassToken", {}), ("PositionalEmbedding", {}), ("SequencePool", {"mode": "first"}),
                ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    return g


def _spec(g: GraphBuilder, shape: list[int]):  # noqa: ANN202
    data = {"source": "sklearn:digits", "input_shape": shape}
    return g.spec("vit-front", "", data, {"loss": "cross_entropy"})


@pytest.mark.parametrize("patch", [4, [4, 2]])
def test_a_vit_front_round_trips_through_onnx(patch: int | list[int]) -> None:
    spec = _spec(_vit_front(patch), [3, 8, 12])
    analysis = validate(spec)
    weights = random_canonical(analysis, seed=1)
    exported = export_onnx(spec, weights, analysis=analysis)
    onnx.checker.check_model(exported, full_check=True)
    result = import_onnx(exported)
    ops = [n.op for n in result.spec.model.nodes]
    assert ops == ["Input", "PatchEmbed", "ClassToken", "PositionalEmbedding", "SequencePool", "Linear", "Output"]
    back = validate(result.spec)
    [embed] = [n for n in back.nodes.values() if n.op == "PatchEmbed"]
    assert embed.params == analysis.nodes["patches"].params
    assert embed.output.shape == analysis.nodes["patches"].output.shape
    assert sorted(v.shape for v in result.weights.values()) == sorted(v.shape for v in weights.values())
    again = export_onnx(result.spec, result.weights, analysis=back)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 12)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(exported, x), atol=1e-6, rtol=0)


def _graph(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_patch_convolution_read_by_anything_but_the_transpose_stays_a_convolution() -> None:
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((4, 2, 2, 2)).astype(np.float32), "shape": np.array([0, 4, -1], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    model = _graph(nodes, inits, [2, 4, 4])
    result = import_onnx(model)
    assert Counter(n.op for n in result.spec.model.nodes) == Counter(
        {"Input": 1, "Conv2d": 1, "Reshape": 1, "ReLU": 1, "Output": 1})
    again = export_onnx(result.spec, result.weights, analysis=validate(result.spec))
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(model, x), atol=1e-6, rtol=0)


def test_gathering_another_position_is_refused_naming_what_would_import() -> None:
    inits = {"w": np.ones((3, 2), np.float32), "one": np.array(1, np.int64)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Gather", ["m", "one"], ["y"], axis=1)]
    with pytest.raises(SpecError) as err:
        import_onnx(_graph(nodes, inits, [4, 3]))
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[y]" and problem.message.startswith("Gather (opset 17): it gathers index 1")
    assert "scalar index 0 along axis 1" in (problem.expected or "")
