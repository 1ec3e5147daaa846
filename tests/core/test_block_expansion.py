"""Composite blocks: expansion into the flat graph, and the validator's problems inside blocks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core import zoo
from core.block_expansion import expand, flat_id
from core.errors import SpecError
from core.load import spec_from_dict
from core.validate import analyse, validate
from core.zoo.builder import GraphBuilder
from core.zoo.vision import _resnet


def block_spec() -> dict[str, Any]:
    """Digits through two uses of a dense block (Linear + ReLU) and a Linear head."""
    return {
        "name": "blocks", "data": {"source": "sklearn:digits"},
        "model": {
            "blocks": [{
                "name": "dense", "inputs": ["x"],
                "params": [{"name": "width", "type": "int", "default": 32}],
                "nodes": [{"id": "fc", "op": "Linear", "params": {"out_features": {"param": "width"}}},
                          {"id": "act", "op": "ReLU"}],
                "edges": [{"source": "x", "target": "fc"}, {"source": "fc", "target": "act"}],
                "output": "act",
            }],
            "nodes": [{"id": "input", "op": "Input"}, {"id": "flat", "op": "Flatten"},
                      {"id": "d1", "op": "dense", "params": {"width": 48}}, {"id": "d2", "op": "dense"},
                      {"id": "head", "op": "Linear", "params": {"out_features": 10}}, {"id": "output", "op": "Output"}],
            "edges": [{"source": "input", "target": "flat"}, {"source": "flat", "target": "d1"},
                      {"source": "d1", "target": "d2"}, {"source": "d2", "target": "head"},
                      {"source": "head", "target": "output"}],
        },
    }


def problems(doc: dict[str, Any]) -> dict[str, str]:
    analysis = analyse(spec_from_dict(doc))
    return {p.location: p.message for p in analysis.problems}


def test_expansion_joins_use_and_inner_ids_and_substitutes_params() -> None:
    flat = expand(spec_from_dict(block_spec()))
    assert flat.model.blocks == []
    assert [n.id for n in flat.model.nodes] == ["input", "flat", "head", "output", "d1__fc", "d1__act", "d2__fc",
                                                "d2__act"]
    assert flat.node("d1__fc").params == {"out_features": 48}
    assert flat.node("d2__fc").params == {"out_features": 32}  # the default
    pairs = {(e.source, e.target) for e in flat.model.edges}
    assert {("flat", "d1__fc"), ("d1__act", "d2__fc"), ("d2__act", "head")} <= pairs


def test_shapes_params_and_uses_of_a_block_spec() -> None:
    analysis = validate(spec_from_dict(block_spec()))
    assert analysis.nodes["d1__fc"].output.shape == (48,)
    assert analysis.uses["d1"].output.shape == (48,) and analysis.uses["d2"].output.shape == (32,)
    assert analysis.uses["d1"].n_params == 64 * 48 + 48
    assert analysis.total_params == (64 * 48 + 48) + (48 * 32 + 32) + (32 * 10 + 10)
    assert analysis.origins["d2__fc"].location() == "model.nodes[d2] > block dense > fc"
    summary = analysis.summary()
    assert summary["uses"][0] == {"id": "d1", "block": "dense", "output_shape": [48], "params": 64 * 48 + 48,
                                  "macs": 64 * 48}
    assert [row["id"] for row in summary["layers"]][2:4] == ["d1__fc", "d1__act"]


def test_long_expanded_ids_are_shortened_uniquely_within_the_id_pattern() -> None:
    a, b = flat_id("u" * 40, "conv_" + "a" * 30), flat_id("u" * 40, "conv_" + "a" * 29 + "b")
    assert len(a) == len(b) == 64 and a != b
    assert flat_id("layer1_0", "conv1") == "layer1_0__conv1"


def test_a_shape_problem_inside_a_block_names_the_use_the_block_and_the_inner_node() -> None:
    doc = block_spec()
    doc["model"]["nodes"][2]["params"]["width"] = 0
    found = analyse(spec_from_dict(doc)).problems
    [p] = [p for p in found if "block dense" in p.location]
    assert p.location == "model.nodes[d1] > block dense > fc.params.out_features"
    assert p.node == "d1"


@pytest.mark.parametrize("edit, location, message", [
    (lambda d: d["model"]["nodes"][2]["params"].update(depth=3), "model.nodes[d1].params.depth",
     "block dense has no such parameter"),
    (lambda d: d["model"]["nodes"][2]["params"].update(width="wide"), "model.nodes[d1].params.width",
     "is not of the parameter's type (int)"),
    (lambda d: d["model"]["blocks"][0]["nodes"][0]["params"].update(out_features={"param": "size"}),
     "model.blocks[dense].nodes[fc].params.out_features", "refers to the parameter 'size', which the block does "
     "not declare"),
    (lambda d: d["model"]["blocks"][0].update(name="Linear"), "model.blocks[Linear].name",
     "is the name of a catalogue op"),
    (lambda d: d["model"]["blocks"][0].update(inputs=["x", "y"]), "model.blocks[dense].inputs",
     "the input y is not used by any node"),
    (lambda d: d["model"]["blocks"][0].update(output="nowhere"), "model.blocks[dense].output",
     "is not a node of the block"),
    (lambda d: d["model"]["blocks"][0]["nodes"].append({"id": "spare", "op": "ReLU"}) or
     d["model"]["blocks"][0]["edges"].append({"source": "fc", "target": "spare"}),
     "model.blocks[dense].nodes[spare]", "does not lead to the block's output: its result is never used"),
    (lambda d: d["model"]["edges"].append({"source": "flat", "target": "d2"}), "model.nodes[d2].inputs",
     "block dense takes 1 input(s) (x) but 2 edge(s) come in"),
])
def test_wrong_blocks_and_uses_are_reported_where_they_are_written(edit: Any, location: str, message: str) -> None:
    doc = block_spec()
    edit(doc)
    found = problems(doc)
    assert found.get(location) == message, found


def test_recursion_is_refused_with_the_cycle_named() -> None:
    doc = block_spec()
    inner = copy.deepcopy(doc["model"]["blocks"][0])
    inner["name"] = "wrapper"
    inner["nodes"][1] = {"id": "act", "op": "dense"}
    doc["model"]["blocks"][0]["nodes"][1] = {"id": "act", "op": "wrapper"}
    doc["model"]["blocks"].append(inner)
    analysis = analyse(spec_from_dict(doc))
    cycle = [p for p in analysis.problems if p.message == "uses itself"]
    assert {p.location for p in cycle} == {"model.blocks[dense]", "model.blocks[wrapper]"}
    assert all(p.received in ("dense → wrapper → dense", "wrapper → dense → wrapper") for p in cycle)
    with pytest.raises(SpecError):
        expand(spec_from_dict(doc))


def test_blocks_may_use_blocks() -> None:
    doc = block_spec()
    doc["model"]["blocks"].append({
        "name": "pair", "inputs": ["x"], "params": [{"name": "width", "type": "int", "default": 16}],
        "nodes": [{"id": "a", "op": "dense", "params": {"width": {"param": "width"}}},
                  {"id": "b", "op": "dense", "params": {"width": 8}}],
        "edges": [{"source": "x", "target": "a"}, {"source": "a", "target": "b"}], "output": "b"})
    doc["model"]["nodes"][3]["op"] = "pair"
    analysis = validate(spec_from_dict(doc))
    assert analysis.nodes["d2__a__fc"].output.shape == (16,) and analysis.uses["d2"].output.shape == (8,)
    assert analysis.origins["d2__b__fc"].location(".x") == "model.nodes[d2] > block pair > b > block dense > fc.x"


def test_a_problem_elsewhere_is_still_found_when_a_use_is_wrong() -> None:
    doc = block_spec()
    doc["model"]["nodes"][2]["params"]["depth"] = 3
    doc["model"]["nodes"].append({"id": "stray", "op": "ReLU"})
    doc["training"] = {"loss": "mse"}
    found = problems(doc)
    assert "model.nodes[d1].params.depth" in found
    assert found["model.nodes[stray]"] == "does not lead to the Output: its result is never used"
    assert found["training.loss"] == "mse is a regression loss but data.task is classification"


@pytest.mark.parametrize("name", ["resnet18_cifar", "resnet18", "resnet50"])
def test_zoo_resnets_with_blocks_match_their_flat_version(name: str) -> None:
    """The block versions have the flat versions' parameters and MACs, and are ~15 nodes on the canvas."""
    spec = zoo.template(name)
    with_blocks = validate(spec)
    g = GraphBuilder()
    cfg = {"resnet18_cifar": ([2, 2, 2, 2], False, 10, True), "resnet18": ([2, 2, 2, 2], False, 1000, False),
           "resnet50": ([3, 4, 6, 3], True, 1000, False)}[name]
    g.add("Output", _resnet(g, g.add("Input", id="input"), *cfg, use_blocks=False), id="output")
    flat = validate(spec.model_copy(update={"model": spec_from_dict({"model": g.model()}).model}))
    assert (with_blocks.total_params, with_blocks.total_macs) == (flat.total_params, flat.total_macs)
    assert len(with_blocks.nodes) == len(flat.nodes)
    assert len(spec.model.nodes) <= (16 if name != "resnet50" else 24)


def test_zoo_transformer_layer_block_has_the_parameters_and_macs_of_the_op() -> None:
    spec = zoo.template("transformer_text_classifier")
    doc = spec.model_dump(mode="json")
    g = GraphBuilder()
    x = g.chain(g.add("Input", id="tokens", dtype="int64"),
                ("Embedding", {"num_embeddings": 20_000, "embedding_dim": 128}), ("PositionalEmbedding", {}),
                *[("TransformerEncoderLayer", {"num_heads": 4, "dim_feedforward": 256, "dropout": 0.1})] * 2,
                ("SequencePool", {"mode": "mean"}), ("Linear", {"out_features": 2}))
    g.add("Output", x, id="output")
    flat = validate(spec_from_dict({**doc, "model": g.model()}))
    with_blocks = validate(spec)
    assert (with_blocks.total_params, with_blocks.total_macs) == (flat.total_params, flat.total_macs)
    assert [n.op for n in spec.model.nodes].count("transformer_layer") == 2
