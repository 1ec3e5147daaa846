"""The extractor on flow states as the streamlit-flow component really returns them."""

from __future__ import annotations

from typing import Any

from core import zoo
from core.extract import PORT_ORDER_KEY, extract, flow_from_spec
from core.validate import analyse


def forms(name: str = "mnist_cnn") -> tuple[dict[str, Any], dict[str, Any]]:
    spec = zoo.template(name)
    return spec.data.model_dump(mode="json"), spec.training.model_dump(mode="json")


def canvas(name: str = "mnist_cnn") -> dict[str, Any]:
    nodes, edges = flow_from_spec(zoo.template(name))
    return {"nodes": nodes, "edges": edges, "selectedId": None, "timestamp": 1}


def test_round_trip_spec_to_canvas_to_spec() -> None:
    spec = zoo.template("resnet18_cifar")
    nodes, edges = flow_from_spec(spec)
    blocks = [b.model_dump(mode="json") for b in spec.model.blocks]  # the editor keeps them beside the canvas
    result = extract({"nodes": nodes, "edges": edges, "blocks": blocks}, *forms("resnet18_cifar"), name=spec.name,
                     description=spec.description)
    assert result.problems == [] and result.notes == []
    assert result.spec.spec_hash() == spec.spec_hash()


def test_pane_created_node_without_op_is_named() -> None:
    state = canvas()
    state["nodes"].append({"id": "st-flow-node_V1StGXR8_Z5jdHi6B", "position": {"x": 0, "y": 0},
                           "data": {"content": "New Node"}, "type": "default"})
    result = extract(state, *forms())
    assert result.spec is None
    [p] = result.problems
    assert p.node == "st-flow-node_V1StGXR8_Z5jdHi6B" and "palette" in p.fix


def test_dangling_and_repeated_edges_are_dropped_with_a_note() -> None:
    state = canvas()
    state["nodes"] = [n for n in state["nodes"] if n["id"] != "dropout2"]  # deleted in the browser
    state["edges"].append(dict(state["edges"][0]))
    result = extract(state, *forms())
    assert result.problems == []  # the drawing still becomes a spec: the gap is the validator's to name
    assert [n.id for n in result.spec.model.nodes] == [n["id"] for n in state["nodes"]]
    assert len(result.spec.model.edges) == len(canvas()["edges"]) - 2  # both edges of dropout2 gone, the repeat kept once
    assert all("dropout2" not in (e.source, e.target) for e in result.spec.model.edges)
    assert any("dropout2" in note for note in result.notes)
    assert any("repeated" in note for note in result.notes)
    # The graph now has a gap: the validator names the nodes on each side.
    found = {p.node for p in analyse(result.spec).problems}
    assert {"relu3", "linear2"} <= found


def test_cycles_drawn_in_the_browser_reach_the_validator() -> None:
    state = canvas()
    state["edges"].append({"id": "st-flow-edge_relu2-conv2d1", "source": "relu2", "target": "conv2d1"})
    result = extract(state, *forms())
    assert result.problems == [] and result.notes == []
    assert ("relu2", "conv2d1") in {(e.source, e.target) for e in result.spec.model.edges}  # kept as drawn
    cyc = {p.node for p in analyse(result.spec).problems if "cycle" in p.message}
    assert cyc == {"conv2d1", "relu1", "conv2d2", "relu2"}


def test_port_order_from_the_editor_becomes_edge_ports() -> None:
    state = canvas("mobilenet_v2")
    add = next(n for n in state["nodes"] if n["data"]["op"] == "Add")
    order = add["data"][PORT_ORDER_KEY]
    add["data"][PORT_ORDER_KEY] = order[::-1]
    result = extract(state, *forms("mobilenet_v2"))
    ports = {e.source: e.port for e in result.spec.model.edges if e.target == add["id"]}
    assert ports == {order[1]: 0, order[0]: 1}


def test_form_errors_are_reported_with_locations() -> None:
    data, training = forms()
    data["batch_size"] = -1
    training["epochs"] = 0
    result = extract(canvas(), data, training)
    assert result.spec is None
    assert {p.location for p in result.problems} == {"data.batch_size", "training.epochs"}


def test_state_objects_with_to_dict_are_accepted() -> None:
    class Node:
        def __init__(self, d: dict[str, Any]) -> None:
            self.d = d

        def to_dict(self) -> dict[str, Any]:
            return self.d

    class State:
        def __init__(self, s: dict[str, Any]) -> None:
            self.nodes = [Node(n) for n in s["nodes"]]
            self.edges = [Node(e) for e in s["edges"]]

    result = extract(State(canvas()), *forms())
    assert result.problems == []
    assert result.spec.spec_hash() == extract(canvas(), *forms()).spec.spec_hash()  # same as the plain dicts
    assert len(result.spec.model.nodes) == 13
