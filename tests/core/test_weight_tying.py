"""``tie_to`` on a Linear (a language model's head sharing its token Embedding's table): the shared weight
is counted once, a tie that cannot hold is a problem naming the node, and the ONNX export holds the table
once. The frameworks' equivalence on the tied graph: tests/frameworks/test_equivalence.py (``tied-head``)."""

from __future__ import annotations

import numpy as np
import pytest

from core.onnx_export import export_onnx
from core.onnx_import import import_onnx
from core.spec import PipelineSpec
from core.validate import analyse, validate
from core.weights import canonical_shapes, random_canonical
from tests.core.test_onnx_import import run_ort
from tests.op_cases import tied_head_spec


def test_a_tied_head_counts_the_shared_table_once() -> None:
    tied = validate(tied_head_spec())
    assert tied.nodes["head"].n_params == 11  # its bias only: the 11×8 table is the Embedding's
    assert tied.total_params == 11 * 8 + 2 * 8 + 11
    assert "head/weight" not in canonical_shapes(tied) and "wte/weight" in canonical_shapes(tied)


def test_a_head_without_tie_keeps_its_own_weight() -> None:
    doc = tied_head_spec().model_dump(mode="json")
    del next(n for n in doc["model"]["nodes"] if n["id"] == "head")["params"]["tie_to"]
    assert validate(PipelineSpec.model_validate(doc)).total_params == 11 * 8 * 2 + 2 * 8 + 11


@pytest.mark.parametrize(("spec", "message"), [
    (tied_head_spec(out_features=12), "wte's table is 11×8 but this Linear's weight is 12×8"),
    (tied_head_spec(tie_to="ln"), "names a LayerNorm node"),
    (tied_head_spec(tie_to="nowhere"), "names no node of the graph"),
], ids=["other-shape", "not-an-embedding", "missing"])
def test_a_tie_that_cannot_hold_is_a_problem_naming_the_node(spec: PipelineSpec, message: str) -> None:
    problems = analyse(spec).problems
    assert [(p.location, p.node) for p in problems] == [("model.nodes[head].params.tie_to", "head")]
    assert message in problems[0].message and problems[0].fix


def test_a_tie_to_an_embedding_that_does_not_feed_the_head_is_a_problem() -> None:
    doc = tied_head_spec().model_dump(mode="json")
    doc["model"]["nodes"].append({"id": "other", "op": "Embedding",
                                  "params": {"num_embeddings": 11, "embedding_dim": 8}})
    doc["model"]["nodes"].append({"id": "join", "op": "Add"})
    doc["model"]["edges"] = [e for e in doc["model"]["edges"] if e["target"] != "output"] + [
        {"source": "input", "target": "other"}, {"source": "other", "target": "join", "port": 0},
        {"source": "head", "target": "join", "port": 1}]
    next(n for n in doc["model"]["nodes"] if n["id"] == "head")["params"]["tie_to"] = "other"
    doc["model"]["edges"] += [{"source": "join", "target": "output"}]
    problems = analyse(PipelineSpec.model_validate(doc)).problems
    # other is 11×8 and the head's output is (6, 11): the Add cannot join them, and the tie is refused on its own
    assert any(p.node == "head" and "does not feed this Linear" in p.message for p in problems), problems


@pytest.mark.parametrize("bias", [True, False])
def test_the_onnx_export_holds_the_table_once_and_computes_the_tied_head(bias: bool) -> None:
    spec = tied_head_spec(bias=bias)
    analysis = validate(spec)
    weights = random_canonical(analysis, seed=3)
    model = export_onnx(spec, weights, analysis=analysis)
    tables = [i for i in model.graph.initializer if tuple(i.dims) == (11, 8)]
    assert [i.name for i in tables] == ["wte/weight"]
    tokens = np.array([[1, 2, 3, 4, 5, 10], [0, 0, 9, 9, 7, 6]], dtype=np.int64)
    e = weights["wte/weight"][tokens]
    e = (e - e.mean(-1, keepdims=True)) / np.sqrt(e.var(-1, keepdims=True) + 1e-5) * weights["ln/weight"] + \
        weights["ln/bias"]
    want = e @ weights["wte/weight"].T + (weights["head/bias"] if bias else 0)
    np.testing.assert_allclose(run_ort(model, tokens), want, atol=1e-5)


def _lm_head_spec(tie: bool) -> PipelineSpec:
    """Token ids → Embedding → positions → a bias-free head (GPT-2's lm_head), tied or not, on a token stream."""
    head: dict[str, object] = {"out_features": 11, "bias": False, **({"tie_to": "wte"} if tie else {})}
    nodes = [{"id": "input", "op": "Input", "params": {"dtype": "int64"}},
             {"id": "wte", "op": "Embedding", "params": {"num_embeddings": 11, "embedding_dim": 8}},
             {"id": "wpe", "op": "PositionalEmbedding"}, {"id": "head", "op": "Linear", "params": head},
             {"id": "output", "op": "Output"}]
    edges = [{"source": a, "target": b} for a, b in
             (("input", "wte"), ("wte", "wpe"), ("wpe", "head"), ("head", "output"))]
    return PipelineSpec.model_validate({
        "name": "lm-head", "model": {"nodes": nodes, "edges": edges}, "training": {"loss": "cross_entropy"},
        "data": {"source": "t.bin", "task": "language_modeling", "block_size": 6, "vocab_size": 11}})


@pytest.mark.parametrize("tie", [True, False])
def test_an_onnx_import_ties_a_head_whose_matrix_is_the_embeddings_table(tie: bool) -> None:
    spec = _lm_head_spec(tie)
    analysis = validate(spec)
    model = export_onnx(spec, random_canonical(analysis, seed=4), analysis=analysis)
    result = import_onnx(model)
    head = next(n for n in result.spec.model.nodes if n.op == "Linear")
    table = next(n.id for n in result.spec.model.nodes if n.op == "Embedding")
    assert head.params.get("tie_to") == (table if tie else None)
    assert (f"{head.id}/weight" in result.weights) is not tie  # a tied table is held once
    assert (result.spec.data.task, result.spec.data.block_size, result.spec.data.vocab_size) == \
        ("language_modeling", 6, 11)
    tokens = np.random.default_rng(0).integers(0, 11, (2, 6))
    again = export_onnx(result.spec, result.weights)
    np.testing.assert_array_equal(run_ort(again, tokens), run_ort(model, tokens))


def test_a_tied_head_inside_a_block_is_refused_at_its_use() -> None:
    doc = tied_head_spec().model_dump(mode="json")
    head = next(n for n in doc["model"]["nodes"] if n["id"] == "head")
    doc["model"]["blocks"] = [{"name": "lm_head", "inputs": ["x"], "output": "proj",
                               "nodes": [{"id": "proj", "op": "Linear", "params": head["params"]}],
                               "edges": [{"source": "x", "target": "proj"}]}]
    head.update(op="lm_head", params={})
    problems = analyse(PipelineSpec.model_validate(doc)).problems
    assert [(p.node, p.message) for p in problems] == [("head", "a Linear inside a block cannot be tied")]
