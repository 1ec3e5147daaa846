"""ONNX import (core/onnx_import) on the published CNNs the ``onnx`` package ships, and on small graphs
that show one rule each: what imports validates and has onnxruntime's output shape; what cannot is
refused with every problem at once. The numerics in every framework: tests/frameworks/test_onnx_import.py."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from core.block_expansion import expand
from core.errors import SpecError
from core.onnx_export import export_onnx
from core.onnx_import import IMPORTERS, ImporterRegistry, import_onnx
from core.ops import REGISTRY
from core.validate import validate
from core.weights import canonical_shapes, random_canonical
from tests.onnx_models import published, with_output, with_random_weights
from tests.op_cases import CASES, OpCase

IMPORTED = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
            "vgg19", "zfnet512")


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name", IMPORTED)
def test_published_model_imports_validates_and_has_onnxruntimes_output_shape(name: str) -> None:
    model = with_random_weights(onnx.load(published(name)))
    result = import_onnx(model, name=name)
    analysis = validate(result.spec)
    assert canonical_shapes(analysis) == {k: tuple(v.shape) for k, v in result.weights.items()}
    x = np.zeros((1, *result.spec.data.input_shape), np.float32)
    reference = run_ort(with_output(model, result.output_tensor), x)
    out = analysis.nodes[analysis.output_id].output.shape  # type: ignore[index]
    assert out == tuple(d for d in reference.shape[1:] if d != 1)  # (C, 1, 1) is flattened for the loss
    assert result.spec.training.loss == "cross_entropy" and result.spec.data.num_classes == 1000


def test_batch_norm_and_its_mul_add_form_fold_into_batchnorm2d() -> None:
    """DenseNet's Caffe export writes BatchNormalization → Mul → Add: one BatchNorm2d each, no arithmetic left."""
    model = with_random_weights(onnx.load(published("densenet121")))
    onnx_ops = Counter(n.op_type for n in model.graph.node)
    ops = Counter(n.op for n in expand(import_onnx(model).spec).model.nodes)
    assert ops["BatchNorm2d"] == onnx_ops["BatchNormalization"] == 121
    assert onnx_ops["Mul"] == onnx_ops["Add"] == 121 and ops["Add"] == 0


def test_trailing_softmax_is_left_to_the_loss_head_and_lrn_sum_gemm_map_onto_the_catalogue() -> None:
    alexnet = import_onnx(with_random_weights(onnx.load(published("bvlc_alexnet"))))
    ops = Counter(n.op for n in expand(alexnet.spec).model.nodes)
    assert ops["Softmax"] == 0 and ops["LocalResponseNorm"] == 2 and ops["Linear"] == 3
    assert any("Softmax" in note for note in alexnet.notes)
    resnet = Counter(n.op for n in expand(import_onnx(with_random_weights(onnx.load(published("resnet50")))).spec).model.nodes)
    assert resnet["Add"] == 16  # ONNX Sum of the residual branches


def _graph(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], shape: list[int], opset: int = 13,
           out_shape: list[int] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_shape_subgraph_is_folded_into_a_flatten() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Gemm", ["flat", "w"], ["y"], transB=1)]
    inits = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus1": np.array([-1], np.int64),
             "w": np.ones((5, 24), np.float32)}
    spec = import_onnx(_graph(nodes, inits, [2, 3, 4])).spec
    assert [n.op for n in spec.model.nodes] == ["Input", "Flatten", "Linear", "Output"]


def test_channel_shuffle_pattern_becomes_one_op_matching_onnxruntime() -> None:
    nodes = [helper.make_node("Reshape", ["x", "split"], ["a"]),
             helper.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["b", "back"], ["y"])]
    inits = {"split": np.array([1, 3, 2, 4, 5], np.int64), "back": np.array([1, 6, 4, 5], np.int64)}
    model = _graph(nodes, inits, [6, 4, 5])
    result = import_onnx(model)
    shuffle = [n for n in result.spec.model.nodes if n.op not in ("Input", "Output")]
    assert [(n.op, n.params) for n in shuffle] == [("ChannelShuffle", {"groups": 3})]
    x = np.arange(120, dtype=np.float32).reshape(1, 6, 4, 5)
    shuffled = x.reshape(1, 3, 2, 4, 5).transpose(0, 2, 1, 3, 4).reshape(1, 6, 4, 5)  # channel c*3+g <- g*2+c
    assert np.array_equal(shuffled, run_ort(model, x))


def test_every_unsupported_node_is_refused_at_once_naming_op_node_and_opset() -> None:
    nodes = [helper.make_node("Einsum", ["x", "x"], ["a"], name="mix", equation="nc,nc->nc"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Erf", ["b"], ["y"], name="gate")]
    with pytest.raises(SpecError) as err:
        import_onnx(_graph(nodes, {}, [4], opset=12))
    problems = err.value.problems
    assert [p.location for p in problems] == ["onnx.nodes[mix]", "onnx.nodes[gate]"]
    assert "Einsum (opset 12)" in problems[0].message and "Erf (opset 12)" in problems[1].message
    assert "Conv" in problems[0].expected and "LRN" in problems[0].expected  # the supported ops are listed


def test_a_configuration_the_catalogue_cannot_express_is_refused_with_what_would_work() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[0, 0, 1, 1]),
             helper.make_node("LRN", ["c"], ["y"], name="lrn", size=4)]
    with pytest.raises(SpecError) as err:
        import_onnx(_graph(nodes, {"w": np.ones((2, 2, 3, 3), np.float32)}, [2, 6, 6], opset=9))
    [problem] = err.value.problems  # the LRN after the refused Conv is not reported: it has no input
    assert problem.location == "onnx.nodes[conv]" and "[0, 0, 1, 1]" in problem.message
    assert "the same padding at both ends" in problem.expected
    nodes = [helper.make_node("LRN", ["x"], ["y"], name="lrn", size=4)]
    with pytest.raises(SpecError, match=r"onnx.nodes\[lrn\]: LRN \(opset 9\): size 4 is even"):
        import_onnx(_graph(nodes, {}, [2, 6, 6], opset=9))


def test_shufflenet_shuffles_and_pools_without_counting_padding() -> None:
    model = with_random_weights(onnx.load(published("shufflenet")))
    nodes = expand(import_onnx(model).spec).model.nodes
    shuffles = [n for n in nodes if n.op == "ChannelShuffle"]
    assert len(shuffles) == Counter(n.op_type for n in model.graph.node)["Transpose"] == 16
    assert any(n.op == "AvgPool2d" and n.params.get("count_include_pad") is False for n in nodes)


def test_a_file_that_is_not_onnx_is_a_clear_error() -> None:
    from core.errors import FlowTrainError

    with pytest.raises(FlowTrainError, match="not an ONNX model|cannot be read"):
        import_onnx(b"this is not a protobuf \xff\xfe")


def test_a_second_importer_for_an_onnx_op_is_refused() -> None:
    registry = ImporterRegistry()
    registry.register("Relu")(lambda ctx: None)
    with pytest.raises(ValueError, match="already has an importer"):
        registry.register("Relu")(lambda ctx: None)
    assert IMPORTERS.supports("Gemm") and IMPORTERS.supports("LRN") and IMPORTERS.supports("Sum")


def test_a_zero_pad_before_a_convolution_becomes_its_padding() -> None:
    """(core tests import no framework: onnxruntime running the Conv with that padding is the oracle)"""
    w = np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant"),
             helper.make_node("Conv", ["p", "w"], ["y"], strides=[2, 2])]
    model = _graph(nodes, {"pads": np.array([0, 0, 1, 2, 0, 0, 1, 2], np.int64), "w": w}, [2, 7, 8])
    spec = import_onnx(model).spec
    [conv] = [n for n in spec.model.nodes if n.op not in ("Input", "Output")]
    assert conv.op == "Conv2d" and conv.params["padding"] == [1, 2]
    x = np.random.default_rng(1).standard_normal((1, 2, 7, 8)).astype(np.float32)
    padded = _graph([helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 2, 1, 2])], {"w": w},
                    [2, 7, 8])
    want = run_ort(padded, x)
    np.testing.assert_allclose(run_ort(model, x), want, atol=1e-5)
    lone = [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="reflect")]
    with pytest.raises(SpecError, match=r"onnx.nodes\[pad\]: Pad \(opset 13\): reflect padding"):
        import_onnx(_graph(lone, {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}, [2, 7, 8]))


def test_clip_and_hard_sigmoid_map_onto_relu6_and_hard_sigmoid() -> None:
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
             helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.2, beta=0.4)]
    model = _graph(nodes, {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}, [5])
    ops = [(n.op, n.params) for n in import_onnx(model).spec.model.nodes if n.op not in ("Input", "Output")]
    assert ops == [("ReLU6", {}), ("HardSigmoid", {"alpha": 0.2, "beta": 0.4})]


def test_an_operator_declared_on_its_op_imports_with_its_attributes_or_onnx_defaults() -> None:
    """The one importer of the ops that are one ONNX operator (core/onnx_import/one_to_one.py):
    attributes become the op's parameters, a missing one takes ONNX's default (HardSigmoid's alpha
    0.2, not the op's 1/6), and an attribute the op has no parameter for is refused, not dropped."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.25), helper.make_node("HardSigmoid", ["a"], ["h"]),
             helper.make_node("Elu", ["h"], ["e"]), helper.make_node("Tanh", ["e"], ["y"])]
    model = _graph(nodes, {}, [5])
    spec = import_onnx(model).spec
    ops = [(n.op, n.params) for n in spec.model.nodes if n.op not in ("Input", "Output")]
    assert ops == [("LeakyReLU", {"negative_slope": 0.25}), ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}),
                   ("ELU", {"alpha": 1.0}), ("Tanh", {})]
    odd = [helper.make_node("Relu", ["x"], ["y"], name="relu", gain=2.0)]
    with pytest.raises(SpecError) as err:
        import_onnx(_graph(odd, {}, [5]))
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[relu]" and "gain" in problem.message and "ReLU" in problem.message


ONE_OPERATOR_CASES = [case for case in CASES if REGISTRY.get(case.op).onnx is not None]


@pytest.mark.parametrize("case", ONE_OPERATOR_CASES, ids=lambda c: c.name)
def test_an_op_that_is_one_onnx_operator_round_trips(case: OpCase) -> None:
    """Export (core/onnx_export/one_to_one.py) then import (core/onnx_import/one_to_one.py): the same
    op with the same parameters (as float32, what ONNX stores: 1/6 comes back 0.16666667), and
    onnxruntime computes the same on both files."""
    spec = case.spec()
    analysis = validate(spec)
    exported = export_onnx(spec, random_canonical(analysis), analysis=analysis)
    back = import_onnx(exported).spec
    [node] = [n for n in back.model.nodes if n.op not in ("Input", "Output")]
    def as_stored(params: dict) -> dict:
        return {k: np.float32(v) if isinstance(v, float) else v for k, v in params.items()}

    assert node.op == case.op
    assert as_stored(validate(back).nodes[node.id].params) == as_stored(analysis.nodes["node"].params)
    again = export_onnx(back, {}, analysis=validate(back))
    x = np.random.default_rng(0).standard_normal((2, *case.shape)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(exported, x), atol=0, rtol=0)
