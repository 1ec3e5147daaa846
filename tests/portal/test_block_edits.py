"""The editor's block edits without Streamlit (portal/editor_blocks.py): the canvas form of a block round-trips
to the spec, nested blocks open and close along a path, undo closes a block it takes away, and
problems inside a block are put on the inner node they name."""

from __future__ import annotations

import copy
import json

from core import zoo
from portal.editor_state import Editor
from tests.portal.block_specs import two_use_json, two_use_spec


def _comparable(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for node in doc["model"]["nodes"] + [n for b in doc["model"]["blocks"] for n in b["nodes"]]:
        node.pop("position", None)
    return doc


def test_a_template_with_blocks_round_trips_through_the_editor():
    for name in ("resnet18_cifar", "transformer_text_classifier"):
        spec = zoo.template(name)
        ed = Editor()
        ed.load_spec(spec)
        assert _comparable(ed.spec().model_dump(mode="json")) == _comparable(spec.model_dump(mode="json"))
        assert ed.problems() == []


def _nested() -> Editor:
    """conv_relu used twice inside a 'stage' block, which the pipeline uses once."""
    doc = two_use_spec()
    doc["model"]["blocks"].append({
        "name": "stage", "inputs": ["x"], "params": [],
        "nodes": [{"id": "a", "op": "conv_relu", "params": {"channels": 4}},
                  {"id": "b", "op": "conv_relu", "params": {"channels": 6}}],
        "edges": [{"source": "x", "target": "a"}, {"source": "a", "target": "b"}], "output": "b"})
    doc["model"]["nodes"][2]["op"] = "stage"
    doc["model"]["nodes"][2]["params"] = {}
    ed = Editor()
    ed.load_json(json.dumps(doc))
    return ed


def test_nested_blocks_open_along_a_path_and_show_the_shapes_of_their_first_use():
    ed = _nested()
    assert ed.problems() == []
    assert ed.open_block("stage") and [n["id"] for n in ed.nodes] == ["x", "a", "b"]
    assert ed.uses("conv_relu") == [(None, "stage1"), ("stage", "a"), ("stage", "b")]
    assert ed.open_block("conv_relu") and ed.open_path == ["stage", "conv_relu"]
    assert ed.shapes_use() == "stage2__a"  # the first use of stage, then its first use of conv_relu
    contents = {n["id"]: n["data"]["content"] for n in ed.canvas_payload()[0]}
    assert "→ 4×8×8" in contents["conv"]  # conv_relu with 4 channels, as stage2 > a uses it
    ed.close_block(1)
    assert ed.open_path == ["stage"] and ed.selected is None
    ed.open_block("stage")  # opening a block already on the path goes back to it
    assert ed.open_path == ["stage"]
    assert ed.add_node("stage") == "" and any("cannot use itself" in n.text for n in ed.notices)
    ed.close_block()
    assert ed.open_block_name is None and len(ed.nodes) == 6


def test_undo_closes_a_block_it_takes_away():
    ed = Editor()
    ed.load_json(two_use_json())
    ed.open_block("conv_relu")
    ed.set_param("conv", "kernel_size", 5)
    ed.undo()
    assert ed.open_path == ["conv_relu"]  # the block is still there: it stays open, its edit undone
    assert ed.node("conv")["data"]["params"]["kernel_size"] == 3
    ed.undo()  # back to the blank pipeline: no block left to show
    assert ed.open_path == [] and [n["id"] for n in ed.nodes] == ["input", "output"]


def test_problems_inside_a_block_mark_the_inner_node_they_name():
    ed = Editor()
    ed.load_json(two_use_json())
    ed.open_block("conv_relu")
    ed.set_param("conv", "kernel_size", 0)
    marked = ed.graph_problems()
    assert set(marked) == {"conv"} and len(marked["conv"]) == 2  # once per use
    ed.set_param("conv", "kernel_size", 3)
    ed.add_node("ReLU")  # relu1, left unconnected: a problem of the block's definition
    assert [p.location for p in ed.problems()] == ["model.blocks[conv_relu].nodes[relu1]"]
    assert set(ed.graph_problems()) == {"relu1"}  # the longest id that fits, not 'relu'


def test_making_a_block_refuses_a_choice_that_would_feed_itself():
    ed = Editor()
    ed.load_spec(zoo.template("mnist_cnn"))
    why = ed.make_block(["conv2d1", "relu2"], "gap")  # conv2d1 → relu1 → conv2d2 → relu2 leaves two out
    assert why is not None and "would each be one" in why
    ed = Editor()
    for op in ("ReLU", "Tanh", "ReLU"):
        ed.add_node(op)
    for a, b in [("input", "relu1"), ("relu1", "tanh1"), ("tanh1", "relu2")]:
        assert ed.connect(a, b)
    why = ed.make_block(["relu1", "relu2"], "gap")  # tanh1 between them stays out: the use would feed itself
    assert why is not None and "feed itself" in why
    assert not ed.blocks and [n["id"] for n in ed.nodes] == ["input", "output", "relu1", "tanh1", "relu2"]
