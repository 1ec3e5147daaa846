"""ONNX import of the transformer's parts (issue 23 item 4). LayerNormalization: FlowTrain's own export of
LayerNorm comes back as LayerNorm with the same parameters and weights and onnxruntime computes the same on
both files; a bias left out imports as zeros; a normalisation over more than the last axis is refused,
naming the node. A Linear on a sequence (exported MatMul + Add) comes back as one Linear with its bias."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper, numpy_helper

from core import zoo
from core.errors import SpecError
from core.onnx_export import export_onnx
from core.onnx_import import import_onnx
from core.validate import validate
from core.weights import random_canonical
from core.zoo.builder import GraphBuilder
from tests.core.test_onnx_import import run_ort
from tests.core.test_onnx_tokens import _graph


def test_layer_norms_round_trip_through_onnx_with_their_weights() -> None:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.add("PatchEmbed", x, id="patches", patch_size=4, embed_dim=6)
    x = g.add("LayerNorm", x, id="ln", eps=1e-6)
    x = g.add("LayerNorm", x, id="plain", elementwise_affine=False)
    x = g.chain(x, ("Flatten", {}), ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    spec = g.spec("ln", "", {"source": "sklearn:digits", "input_shape": [3, 8, 8]}, {"loss": "cross_entropy"})
    analysis = validate(spec)
    weights = random_canonical(analysis, seed=1)
    weights["ln/weight"] = weights["ln/weight"] + 0.5  # not the ones an initialiser draws
    weights["ln/bias"] = weights["ln/bias"] + 0.25
    exported = export_onnx(spec, weights, analysis=analysis)
    result = import_onnx(exported)
    back = validate(result.spec)
    norms = [n for n in back.nodes.values() if n.op == "LayerNorm"]
    assert [n.params["eps"] for n in norms] == [1e-6, 1e-5]
    [ln, plain] = [n.id for n in norms]
    np.testing.assert_array_equal(result.weights[f"{ln}/weight"], weights["ln/weight"])
    np.testing.assert_array_equal(result.weights[f"{ln}/bias"], weights["ln/bias"])
    np.testing.assert_array_equal(result.weights[f"{plain}/weight"], np.ones(6, np.float32))
    again = export_onnx(result.spec, result.weights, analysis=back)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(exported, x), atol=1e-6, rtol=0)


def test_a_layer_normalization_without_bias_imports_with_zeros() -> None:
    scale = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    model = _graph([helper.make_node("LayerNormalization", ["x", "scale"], ["y"], epsilon=1e-3)], {"scale": scale},
                   [3, 4])
    result = import_onnx(model)
    [ln] = [n for n in result.spec.model.nodes if n.op == "LayerNorm"]
    np.testing.assert_array_equal(result.weights[f"{ln.id}/bias"], np.zeros(4, np.float32))
    again = export_onnx(result.spec, result.weights, analysis=validate(result.spec))
    x = np.random.default_rng(1).standard_normal((1, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(model, x), atol=1e-6, rtol=0)


@pytest.mark.parametrize("axis", [1, -2])
def test_a_layer_normalization_over_more_axes_is_refused_naming_the_node(axis: int) -> None:
    inits = {"scale": np.ones((3, 4), np.float32), "bias": np.zeros((3, 4), np.float32)}
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], name="norm_all", axis=axis)
    model = _graph([node], inits, [3, 4])
    assert run_ort(model, np.ones((1, 3, 4), np.float32)).shape == (1, 3, 4)  # a model a runtime runs
    with pytest.raises(SpecError) as err:
        import_onnx(model)
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[norm_all]"
    assert problem.message.startswith(f"LayerNormalization (opset 17): it normalises from axis {axis}")
    assert "the last axis only" in (problem.expected or "")


def test_a_linear_on_a_sequence_comes_back_as_one_linear_with_its_bias() -> None:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.add("PatchEmbed", x, id="patches", patch_size=4, embed_dim=6)
    x = g.add("Linear", x, id="mix", out_features=5)
    x = g.chain(x, ("Flatten", {}), ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    spec = g.spec("seq", "", {"source": "sklearn:digits", "input_shape": [3, 8, 8]}, {"loss": "cross_entropy"})
    analysis = validate(spec)
    weights = random_canonical(analysis, seed=2)
    weights["mix/bias"] = weights["mix/bias"] + 1.0
    exported = export_onnx(spec, weights, analysis=analysis)
    assert [n.op_type for n in exported.graph.node][3:5] == ["MatMul", "Add"]  # the sequence form
    result = import_onnx(exported)
    assert [n.op for n in result.spec.model.nodes] == ["Input", "PatchEmbed", "Linear", "Flatten", "Linear", "Output"]
    [mix] = [n for n in result.spec.model.nodes if n.op == "Linear" and n.params["out_features"] == 5]
    assert mix.params["bias"] is True
    np.testing.assert_array_equal(result.weights[f"{mix.id}/bias"], weights["mix/bias"])
    again = export_onnx(result.spec, result.weights, analysis=validate(result.spec))
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run_ort(again, x), run_ort(exported, x), atol=1e-6, rtol=0)


def _round_trip(spec, seed: int, shape: tuple[int, ...]):  # noqa: ANN202
    """Export with random weights, import, export the import: (the import, its ops, max |Δ| of onnxruntime)."""
    analysis = validate(spec)
    weights = random_canonical(analysis, seed=seed)
    exported = export_onnx(spec, weights, analysis=analysis)
    result = import_onnx(exported, fold=False)
    again = export_onnx(result.spec, result.weights, analysis=validate(result.spec))
    x = np.random.default_rng(seed).standard_normal((2, *shape)).astype(np.float32)
    return result, Counter(n.op for n in result.spec.model.nodes), np.abs(run_ort(again, x) - run_ort(exported, x)).max()


@pytest.mark.parametrize(("norm_first", "activation", "causal"), [(True, "gelu", False), (False, "relu", True)])
def test_an_encoder_layer_comes_back_as_its_parts(norm_first: bool, activation: str, causal: bool) -> None:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.add("PatchEmbed", x, id="patches", patch_size=4, embed_dim=8)
    x = g.add("MultiheadAttention", x, id="attn", num_heads=2, causal=causal)
    x = g.add("TransformerEncoderLayer", x, id="enc", num_heads=4, dim_feedforward=16, activation=activation,
              norm_first=norm_first, layer_norm_eps=1e-6)
    x = g.chain(x, ("Flatten", {}), ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    spec = g.spec("enc", "", {"source": "sklearn:digits", "input_shape": [3, 8, 8]}, {"loss": "cross_entropy"})
    result, ops, diff = _round_trip(spec, 4, (3, 8, 8))
    act = {"gelu": "GELU", "relu": "ReLU"}[activation]
    assert ops == Counter({"Input": 1, "PatchEmbed": 1, "MultiheadAttention": 2, "LayerNorm": 2, "Add": 2,
                           "Linear": 3, act: 1, "Flatten": 1, "Output": 1})
    attention = {n.id: n.params for n in result.spec.model.nodes if n.op == "MultiheadAttention"}
    assert attention["attn"] == {"num_heads": 2, "bias": True, "causal": causal}
    assert attention["enc"] == {"num_heads": 4, "bias": True, "causal": False}
    assert diff == 0.0  # the same ONNX operators on the same weights


def test_vit_cifar_round_trips_through_onnx_within_1e_4() -> None:
    result, ops, diff = _round_trip(zoo.template("vit_cifar"), 0, (3, 32, 32))
    assert ops == Counter({"Input": 1, "PatchEmbed": 1, "ClassToken": 1, "PositionalEmbedding": 1,
                           "MultiheadAttention": 6, "LayerNorm": 13, "Add": 12, "Linear": 13, "GELU": 6,
                           "SequencePool": 1, "Output": 1})
    assert diff <= 1e-4


def test_attention_with_another_mask_is_refused_not_imported_unmasked() -> None:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.add("PatchEmbed", x, id="patches", patch_size=4, embed_dim=8)
    x = g.add("MultiheadAttention", x, id="attn", num_heads=2, causal=True)
    x = g.chain(x, ("Flatten", {}), ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    spec = g.spec("mask", "", {"source": "sklearn:digits", "input_shape": [3, 8, 8]}, {"loss": "cross_entropy"})
    analysis = validate(spec)
    model = export_onnx(spec, random_canonical(analysis, seed=5), analysis=analysis)
    [mask] = [i for i in model.graph.initializer if i.name.endswith("causal_mask")]
    mask.CopyFrom(numpy_helper.from_array(np.tril(np.full((4, 4), -np.inf, np.float32), -1), mask.name))
    with pytest.raises(SpecError) as err:
        import_onnx(model)
    assert err.value.problems and all(p.location.startswith("onnx.nodes[attn/") for p in err.value.problems)
    assert any("permutes the axes [0, 2, 1, 3]" in p.message for p in err.value.problems)
