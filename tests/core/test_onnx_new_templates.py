"""ONNX round trips of the issue-23 templates and the tanh GELU (onnxruntime is the oracle; core tests run
no framework). unet (at 8 base channels) and gpt_mini go out with random weights and come back as the catalogue's ops (the U-Net's
ConvTranspose as ConvTranspose2d, GPT's tanh GELU as GELU(approximate='tanh')); onnxruntime computes the same
on both files within 1e-4 (vit_cifar's: tests/core/test_onnx_transformer_parts.py; every framework against
onnxruntime on the exported file: tests/frameworks/test_onnx_export.py). The tanh GELU imports from ONNX's
own Gelu (opset 20) and from the decomposed form torch.onnx writes as well as FlowTrain's."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from core import zoo
from core.equivalence import small_zoo_spec
from core.errors import SpecError
from core.onnx_export import export_onnx
from core.onnx_import import ImportResult, import_onnx
from core.spec import PipelineSpec
from core.validate import validate
from core.weights import random_canonical
from core.zoo.builder import GraphBuilder
from core.zoo.segmentation import SHAPES_CLASSES, unet_graph
from tests.core.test_onnx_import import run_ort


def _small_unet() -> PipelineSpec:
    """The zoo's unet with 8 channels at the top instead of 64: the same 46 layers (4 down, 4 up), 1/64 of
    the weights (31 M took half a minute to export, import and run twice)."""
    doc = zoo.template("unet").model_dump(mode="json")
    g = GraphBuilder()
    g.add("Output", unet_graph(g, SHAPES_CLASSES, base=8), id="output")
    doc.update(model=g.model())
    doc["data"]["input_shape"] = [3, 32, 32]
    return PipelineSpec.model_validate(doc)


def _round_trip(spec: PipelineSpec, x: np.ndarray) -> tuple[ImportResult, float, float]:
    """(the import, max |Δ| of onnxruntime on the two files, the outputs' scale)."""
    analysis = validate(spec)
    exported = export_onnx(spec, random_canonical(analysis, seed=3), analysis=analysis)
    result = import_onnx(exported, fold=False)
    again = export_onnx(result.spec, result.weights, analysis=validate(result.spec))
    before, after = run_ort(exported, x), run_ort(again, x)
    return result, float(np.abs(after - before).max()), float(np.abs(before).max())


def _ops(result: ImportResult) -> Counter[str]:
    return Counter(n.op for n in result.spec.model.nodes)


def test_unet_round_trips_through_onnx_within_1e_4() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    result, diff, scale = _round_trip(_small_unet(), x)
    assert _ops(result) == Counter({"Conv2d": 19, "ReLU": 18, "MaxPool2d": 4, "ConvTranspose2d": 4, "Concat": 4,
                           "Input": 1, "Output": 1})
    assert diff <= 1e-4 * max(1.0, scale)


def test_gpt_mini_round_trips_through_onnx_within_1e_4() -> None:
    x = np.random.default_rng(0).integers(0, 256, size=(2, 64), dtype=np.int64)
    result, diff, scale = _round_trip(small_zoo_spec("gpt_mini"), x)
    assert _ops(result) == Counter({"Input": 1, "Embedding": 1, "PositionalEmbedding": 1, "MultiheadAttention": 3,
                                    "LayerNorm": 7, "Add": 6, "Linear": 7, "GELU": 3, "Output": 1})
    nodes = {n.op: n for n in result.spec.model.nodes if n.op in ("Embedding", "GELU")}
    head = [n for n in result.spec.model.nodes if n.op == "Linear"][-1]
    assert head.params.get("tie_to") == nodes["Embedding"].id  # the head tied again: the table held once
    assert nodes["GELU"].params == {"approximate": "tanh"}
    assert sum(w.size for w in result.weights.values()) == 636_032  # gpt_mini's count (tied)
    assert diff <= 1e-4 * max(1.0, scale)


def _tanh_gelu_nodes(torch_order: bool) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray]]:
    """½x(1 + tanh(√(2/π)(x + 0.044715x³))) in FlowTrain's operand order, or in torch.onnx's (constants
    first, x·(x·x))."""
    mul = helper.make_node
    consts = {"k": np.float32(math.sqrt(2 / math.pi)), "c": np.float32(0.044715), "one": np.float32(1.0),
              "half": np.float32(0.5)}
    if torch_order:
        nodes = [mul("Mul", ["x", "x"], ["sq"]), mul("Mul", ["x", "sq"], ["cube"]), mul("Mul", ["c", "cube"], ["t"]),
                 mul("Add", ["x", "t"], ["poly"]), mul("Mul", ["k", "poly"], ["inner"]), mul("Tanh", ["inner"], ["th"]),
                 mul("Add", ["one", "th"], ["plus"]), mul("Mul", ["half", "x"], ["hx"]),
                 mul("Mul", ["hx", "plus"], ["y"])]
    else:
        nodes = [mul("Mul", ["x", "x"], ["sq"]), mul("Mul", ["sq", "x"], ["cube"]), mul("Mul", ["cube", "c"], ["t"]),
                 mul("Add", ["x", "t"], ["poly"]), mul("Mul", ["poly", "k"], ["inner"]), mul("Tanh", ["inner"], ["th"]),
                 mul("Mul", ["x", "half"], ["hx"]), mul("Add", ["th", "one"], ["plus"]),
                 mul("Mul", ["hx", "plus"], ["y"])]
    return nodes, {k: np.asarray(v) for k, v in consts.items()}


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], opset: int) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


@pytest.mark.parametrize("form", ["gelu20", "flowtrain", "torch"])
def test_tanh_gelu_imports_as_gelu_tanh_matching_onnxruntime(form: str) -> None:
    if form == "gelu20":
        model = _model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], {}, 20)
    else:
        model = _model(*_tanh_gelu_nodes(form == "torch"), 17)
    spec = import_onnx(model).spec
    [node] = [n for n in spec.model.nodes if n.op not in ("Input", "Output")]
    assert (node.op, node.params) == ("GELU", {"approximate": "tanh"})
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32) * 3
    again = export_onnx(spec, {}, analysis=validate(spec))
    np.testing.assert_allclose(run_ort(again, x), run_ort(model, x), atol=1e-5, rtol=0)


def test_a_near_miss_of_the_tanh_gelu_is_not_imported_as_one() -> None:
    """Another constant inside the tanh: not GELU; its pieces (Mul by x on both sides) are refused, not fused."""
    nodes, inits = _tanh_gelu_nodes(False)
    inits["c"] = np.asarray(np.float32(0.05))
    with pytest.raises(SpecError) as err:
        import_onnx(_model(nodes, inits, 17))
    assert all("GELU" not in p.message for p in err.value.problems)
    assert any(p.location.startswith("onnx.nodes[") for p in err.value.problems)


def test_gelu_exact_from_opset_20_and_an_unknown_approximation_is_refused() -> None:
    spec = import_onnx(_model([helper.make_node("Gelu", ["x"], ["y"])], {}, 20)).spec
    assert [(n.op, n.params) for n in spec.model.nodes if n.op == "GELU"] == [("GELU", {"approximate": "none"})]
    with pytest.raises(SpecError) as err:
        import_onnx(_model([helper.make_node("Gelu", ["x"], ["y"], approximate="fast")], {}, 20))
    assert "approximate 'fast'" in err.value.problems[0].message
