"""Graph checks and shape inference: every problem is reported at once and names its node."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core import zoo
from core.errors import SpecError
from core.load import spec_from_dict
from core.validate import analyse, validate


def base() -> dict[str, Any]:
    return zoo.template("mnist_cnn").model_dump(mode="json")


def problems(doc: dict[str, Any]) -> list[Any]:
    return analyse(spec_from_dict(doc)).problems


def nodes_named(doc: dict[str, Any]) -> set[str]:
    return {p.node for p in problems(doc) if p.node}


def test_valid_template_has_no_problems_and_infers_every_shape() -> None:
    result = validate(spec_from_dict(base()))
    shapes = {k: v.output.shape for k, v in result.nodes.items()}
    assert shapes["conv2d1"] == (32, 26, 26)
    assert shapes["maxpool2d1"] == (64, 12, 12)
    assert shapes["flatten1"] == (9216,)
    assert shapes["output"] == (10,)


def test_in_features_are_inferred_from_upstream() -> None:
    doc = base()
    conv = next(n for n in doc["model"]["nodes"] if n["id"] == "conv2d2")
    conv["params"]["out_channels"] = 16  # the Linear after the Flatten follows without edits
    result = validate(spec_from_dict(doc))
    assert result.nodes["flatten1"].output.shape == (16 * 12 * 12,)
    assert result.nodes["linear1"].n_params == 16 * 12 * 12 * 128 + 128


def test_cycle_names_every_node_in_it() -> None:
    doc = base()
    doc["model"]["edges"].append({"source": "relu2", "target": "conv2d2"})
    found = problems(doc)
    cyc = {p.node for p in found if "cycle" in p.message}
    assert cyc == {"conv2d2", "relu2"}
    assert any("conv2d2 → relu2 → conv2d2" in (p.received or "") or "relu2 → conv2d2 → relu2" in (p.received or "")
               for p in found)


def test_shape_mismatch_names_the_node_and_the_shapes() -> None:
    doc = base()
    doc["model"]["nodes"] = [n for n in doc["model"]["nodes"] if n["id"] != "flatten1"]
    doc["model"]["edges"] = [e for e in doc["model"]["edges"] if "flatten1" not in (e["source"], e["target"])]
    doc["model"]["edges"].append({"source": "dropout1", "target": "linear1"})
    [p] = problems(doc)
    assert p.node == "linear1"
    assert "64×12×12" in p.received
    assert "Flatten" in p.fix


def test_all_problems_are_reported_together() -> None:
    doc = base()
    nodes = {n["id"]: n for n in doc["model"]["nodes"]}
    nodes["conv2d1"]["params"]["out_channels"] = 0
    nodes["linear2"]["params"]["bias"] = "yes"
    nodes["dropout2"]["params"]["rate"] = 0.3
    doc["model"]["nodes"].append({"id": "stray", "op": "ReLU"})
    assert {"conv2d1", "linear2", "dropout2", "stray"} <= nodes_named(doc)


def test_unknown_op_suggests_the_closest() -> None:
    doc = base()
    doc["model"]["nodes"][1]["op"] = "Conv2D"
    [p] = [p for p in problems(doc) if p.node == "conv2d1"]
    assert "unknown op" in p.message and "Conv2d" in p.fix


def test_missing_required_parameter() -> None:
    doc = base()
    del doc["model"]["nodes"][1]["params"]["out_channels"]
    [p] = problems(doc)
    assert p.location == "model.nodes[conv2d1].params.out_channels" and "missing" in p.message


@pytest.mark.parametrize("edit, node", [
    (lambda d: d["model"]["edges"].pop(0), "conv2d1"),  # Input no longer connected
    (lambda d: d["model"]["nodes"].append({"id": "out2", "op": "Output"}), "out2"),
])
def test_arity_and_endpoints(edit: Any, node: str) -> None:
    doc = base()
    edit(doc)
    assert node in nodes_named(doc)


def test_disconnected_and_dead_end_nodes() -> None:
    doc = base()
    doc["model"]["nodes"].append({"id": "side", "op": "ReLU"})
    doc["model"]["edges"].append({"source": "relu1", "target": "side"})
    [p] = problems(doc)
    assert p.node == "side" and "does not lead to the Output" in p.message


def test_concat_port_order_decides_the_layout() -> None:
    doc = {
        "data": {"source": "sklearn:iris"},
        "model": {"nodes": [
            {"id": "x", "op": "Input"},
            {"id": "a", "op": "Linear", "params": {"out_features": 5}},
            {"id": "b", "op": "Linear", "params": {"out_features": 7}},
            {"id": "cat", "op": "Concat"},
            {"id": "head", "op": "Linear", "params": {"out_features": 3}},
            {"id": "y", "op": "Output"},
        ], "edges": [
            {"source": "x", "target": "a"}, {"source": "x", "target": "b"},
            {"source": "b", "target": "cat", "port": 0}, {"source": "a", "target": "cat", "port": 1},
            {"source": "cat", "target": "head"}, {"source": "head", "target": "y"},
        ]},
    }
    result = validate(spec_from_dict(doc))
    assert result.nodes["cat"].inputs == ("b", "a")
    assert result.nodes["cat"].output.shape == (12,)
    bad = copy.deepcopy(doc)
    bad["model"]["edges"][3]["port"] = 0
    assert "cat" in nodes_named(bad)


def test_add_requires_equal_shapes() -> None:
    doc = base()
    doc["model"]["nodes"].append({"id": "sum", "op": "Add"})
    doc["model"]["edges"] = [e for e in doc["model"]["edges"] if e["target"] != "conv2d2"]
    doc["model"]["edges"] += [{"source": "relu1", "target": "sum"}, {"source": "input", "target": "sum"},
                              {"source": "sum", "target": "conv2d2"}]
    [p] = [p for p in problems(doc) if p.node == "sum"]
    assert "1×28×28" in p.message and "32×26×26" in p.message


def test_data_layer_shape_must_match_the_input() -> None:
    doc = base()
    doc["model"]["nodes"][0]["params"]["shape"] = [1, 28, 28]
    doc["data"]["preprocessing"][0]["size"] = [32, 32]
    [p] = problems(doc)
    assert p.node == "input" and "1×32×32" in p.expected


def test_an_input_without_shape_follows_the_data_layer() -> None:
    doc = base()
    doc["data"]["preprocessing"][0]["size"] = [32, 32]
    result = validate(spec_from_dict(doc))
    assert result.nodes["input"].output.shape == (1, 32, 32)
    assert result.nodes["flatten1"].output.shape == (64 * 14 * 14,)


def test_prediction_must_match_the_number_of_classes() -> None:
    doc = base()
    next(n for n in doc["model"]["nodes"] if n["id"] == "linear2")["params"]["out_features"] = 7
    [p] = problems(doc)
    assert p.node == "output" and "10 classes" in p.expected


def test_absurd_sizes_are_refused_without_allocating() -> None:
    doc = base()
    next(n for n in doc["model"]["nodes"] if n["id"] == "linear1")["params"]["out_features"] = 10**12
    [p] = problems(doc)
    assert p.node == "linear1" and "out of range" in p.message


def test_total_parameter_budget() -> None:
    nodes = [{"id": "x", "op": "Input", "params": {"shape": [1_000_000]}}]
    edges = []
    prev = "x"
    for i in range(30):
        nodes.append({"id": f"l{i}", "op": "Linear", "params": {"out_features": 1_000_000}})
        edges.append({"source": prev, "target": f"l{i}"})
        prev = f"l{i}"
    nodes.append({"id": "y", "op": "Output"})
    edges.append({"source": prev, "target": "y"})
    doc = {"data": {"source": "data.csv", "task": "regression"}, "training": {"loss": "mse"},
           "model": {"nodes": nodes, "edges": edges}}
    found = problems(doc)
    assert any("parameters" in p.message and p.node == "l0" for p in found)


def test_token_ids_must_go_through_an_embedding() -> None:
    doc = zoo.template("lstm_text_classifier").model_dump(mode="json")
    doc["model"]["edges"] = [{"source": "tokens", "target": "lstm1"}] + [
        e for e in doc["model"]["edges"] if e["source"] != "tokens" and e["target"] != "lstm1"]
    doc["model"]["nodes"] = [n for n in doc["model"]["nodes"] if n["op"] != "Embedding"]
    found = [p for p in problems(doc) if p.node == "lstm1"]
    assert found and "Embedding" in found[0].fix


def test_validate_raises_one_error_with_every_problem() -> None:
    doc = base()
    doc["model"]["nodes"][1]["params"]["kernel_size"] = 99
    doc["model"]["nodes"].append({"id": "z", "op": "Nope"})
    with pytest.raises(SpecError) as err:
        validate(spec_from_dict(doc))
    assert set(err.value.node_ids) >= {"conv2d1", "z"}
    assert "conv2d1" in str(err.value) and "z" in str(err.value)


def test_ten_thousand_node_graphs_are_handled_without_recursion_limits() -> None:
    nodes = [{"id": "x", "op": "Input", "params": {"shape": [8]}}]
    nodes += [{"id": f"r{i}", "op": "ReLU"} for i in range(10_000)]
    nodes.append({"id": "y", "op": "Output"})
    ids = [n["id"] for n in nodes]
    edges = [{"source": a, "target": b} for a, b in zip(ids, ids[1:])]
    doc = {"data": {"source": "table.csv", "task": "regression"}, "training": {"loss": "mse"},
           "model": {"nodes": nodes, "edges": edges}}
    assert validate(spec_from_dict(doc)).nodes["y"].output.shape == (8,)
    edges.append({"source": "r9999", "target": "r0"})  # one long cycle
    cyc = {p.node for p in problems(doc) if "cycle" in p.message}
    assert len(cyc) == 10_000
