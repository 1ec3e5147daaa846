"""Composite blocks in the editor through AppTest: a use is one node with its own style and its
block's parameters in the side form; opening the block shows its subgraph (ports, output) with the
way back; an edit inside changes the one definition, hence every use, in the exported spec."""

from __future__ import annotations

import json

import pytest

from core import zoo
from core.block_expansion import expand
from tests.portal.block_specs import USES, two_use_json
from tests.portal.conftest import (
    assert_no_exception,
    canvas_args,
    downloaded,
    edge,
    editor,
    fake_canvas_event,
    form,
    messages,
)


def _imported(app):
    at = app()
    at.file_uploader(key=editor(at).upload_key).set_value(("blocks.json", two_use_json().encode(), "application/json"))
    at.run()
    assert_no_exception(at)
    return at


def _nodes(at) -> dict[str, dict]:
    return {n["id"]: n for n in canvas_args(at)["nodes"]}


def _texts(at) -> list[str]:
    return [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]


def _exported(at, downloads) -> dict:
    return json.loads(downloaded(at, downloads, "Export spec (JSON)"))


def test_a_use_is_one_node_with_its_blocks_params_in_the_side_form(app):
    at = _imported(app)
    nodes = _nodes(at)
    assert list(nodes) == ["input", "stage1", "stage2", "flatten", "head", "output"]  # the block's nodes are not drawn
    for use in USES:
        assert "▣ conv\\_relu" in nodes[use]["data"]["content"]
        assert "double" in nodes[use]["style"]["border"] and nodes[use]["style"]["background"] != \
            nodes["flatten"]["style"]["background"]  # a use looks unlike a plain op
    assert "channels=16" in nodes["stage2"]["data"]["content"]
    assert at.button(key="editor.block.open.conv_relu").label == "Open conv_relu"

    fake_canvas_event(at, selected="stage2")
    field = form(at, "number_input", "param.stage2.channels")
    assert field.value == 16
    field.set_value(32).run()
    assert_no_exception(at)
    ed = editor(at)
    assert ed.node("stage2")["data"]["params"]["channels"] == 32
    assert "channels=32" in _nodes(at)["stage2"]["data"]["content"]
    assert {n.id: n.params for n in ed.spec().model.nodes}["stage2"] == {"channels": 32}
    assert "→ 32×8×8" in _nodes(at)["stage2"]["data"]["content"]  # the use's output, inferred through the block
    # a value the block's inner layer cannot take is a problem of that use, named where it is inside
    form(at, "number_input", "param.stage2.channels").set_value(0).run()
    assert any("model.nodes[stage2] > block conv_relu > conv.params.out_channels" in e.value for e in at.error)
    assert _nodes(at)["stage2"]["style"]["border"].startswith("3px double #d62728")


def test_opening_a_block_edits_every_use_and_back_returns_to_the_pipeline(app, downloads):
    at = _imported(app)
    fake_canvas_event(at, selected="stage1")
    at.button(key="editor.open_block").click().run()
    assert_no_exception(at)
    nodes = _nodes(at)
    assert list(nodes) == ["x", "conv", "relu"]  # the block's own subgraph, its input port first
    assert nodes["x"]["type"] == "input" and "input port" in nodes["x"]["data"]["content"]
    assert nodes["x"]["deletable"] is False  # the port is the block's interface
    assert "output of the block" in nodes["relu"]["data"]["content"]
    assert any("Editing the block Pipeline › **conv_relu**" in t for t in _texts(at))
    assert any("Used by 2 nodes: stage1, stage2" in t for t in _texts(at))
    assert canvas_args(at)["fitView"] is True  # a new graph: the view fits it

    # the inner convolution: its out_channels stays bound to the block parameter; its kernel is edited
    fake_canvas_event(at, selected="conv")
    assert any("bound to block param **channels**" in t for t in _texts(at))
    form(at, "text_input", "param.conv.kernel_size").set_value("5").run()
    assert_no_exception(at)
    assert "kernel_size=5" in _nodes(at)["conv"]["data"]["content"]

    at.button(key="editor.block.back").click().run()
    assert_no_exception(at)
    assert list(_nodes(at)) == ["input", "stage1", "stage2", "flatten", "head", "output"]
    assert not any("Editing the block" in t for t in _texts(at))
    flat = {n.id: n.params for n in expand(editor(at).spec()).model.nodes}
    assert flat["stage1__conv"]["kernel_size"] == flat["stage2__conv"]["kernel_size"] == 5  # every use
    assert (flat["stage1__conv"]["out_channels"], flat["stage2__conv"]["out_channels"]) == (8, 16)
    spec = _exported(at, downloads)
    [block] = spec["model"]["blocks"]
    conv = next(n for n in block["nodes"] if n["id"] == "conv")
    assert conv["params"] == {"out_channels": {"param": "channels"}, "kernel_size": 5, "padding": 1}
    assert [n["op"] for n in spec["model"]["nodes"] if n["id"] in USES] == ["conv_relu", "conv_relu"]
    assert [n["params"] for n in spec["model"]["nodes"] if n["id"] in USES] == [{"channels": 8}, {"channels": 16}]


def test_nodes_and_edges_added_inside_a_block_change_its_definition(app):
    at = _imported(app)
    at.button(key="editor.block.open.conv_relu").click().run()
    assert not [b for b in at.button if b.key == "palette.block.conv_relu"]  # a block cannot use itself
    at.button(key="palette.BatchNorm2d").click().run()
    assert_no_exception(at)
    ed = editor(at)
    assert ed.selected == "batchnorm2d1" and "batchnorm2d1" in _nodes(at)
    fake_canvas_event(at, edges=[edge("x", "conv"), edge("conv", "relu"), edge("relu", "batchnorm2d1")])
    at.button(key="editor.block_output").click().run()
    assert "output of the block" in _nodes(at)["batchnorm2d1"]["data"]["content"]
    # a drawn edge into the port is refused; a port deleted in the browser comes back
    fake_canvas_event(at, edges=[edge("x", "conv"), edge("conv", "relu"), edge("relu", "batchnorm2d1"),
                                 edge("batchnorm2d1", "x")])
    assert any("x is an input port of the block" in m for m in messages(at))
    assert ("batchnorm2d1", "x") not in [(e["source"], e["target"]) for e in ed.edges]
    fake_canvas_event(at, nodes=[n for n in canvas_args(at)["nodes"] if n["id"] != "x"])
    assert "x" in _nodes(at)
    at.button(key="editor.block.back").click().run()
    [block] = ed.spec().model.blocks
    assert [n.id for n in block.nodes] == ["conv", "relu", "batchnorm2d1"] and block.output == "batchnorm2d1"
    assert ("relu", "batchnorm2d1") in [(e.source, e.target) for e in block.edges]
    assert len(ed.nodes) == 6  # the pipeline itself is unchanged
    # undo takes the block's last edit back, and the pipeline stays on the canvas
    at.button(key="toolbar.undo").click().run()
    assert ed.open_block_name is None and ed.spec().model.blocks[0].output == "relu"


def test_a_bound_parameter_can_be_unbound_and_bound_again(app):
    at = _imported(app)
    at.button(key="editor.block.open.conv_relu").click().run()
    fake_canvas_event(at, selected="conv")
    at.button(key="editor.unbind.conv.out_channels").click().run()
    ed = editor(at)
    assert ed.node("conv")["data"]["params"]["out_channels"] == 8  # the block parameter's default, for every use
    assert form(at, "number_input", "param.conv.out_channels").value == 8
    at.selectbox(key="editor.bind.param.conv").set_value("out_channels")
    at.selectbox(key="editor.bind.to.conv").set_value("channels")
    at.button(key="editor.bind").click().run()
    assert_no_exception(at)
    assert ed.node("conv")["data"]["params"]["out_channels"] == {"param": "channels"}
    assert any("bound to block param **channels**" in t for t in _texts(at))


def test_a_use_added_from_the_palette_is_a_block_node(app):
    at = _imported(app)
    at.button(key="palette.block.conv_relu").click().run()
    assert_no_exception(at)
    ed = editor(at)
    assert ed.selected == "convrelu1" and ed.node("convrelu1")["data"]["op"] == "conv_relu"
    assert form(at, "number_input", "param.convrelu1.channels").value == 8  # the block parameter's default
    assert "double" in _nodes(at)["convrelu1"]["style"]["border"]


def test_a_block_made_from_chosen_nodes_replaces_them_and_computes_the_same(app):
    at = app()
    at.selectbox(key="toolbar.template").set_value("mnist_cnn").run()
    at.button(key="toolbar.load").click().run()
    ed = editor(at)
    before = ed.analysis()
    at.multiselect(key="editor.make.nodes").set_value(["conv2d1", "relu1", "conv2d2", "relu2"])
    at.text_input(key="editor.make.name").set_value("Linear")
    at.button(key="editor.make").click().run()
    assert any("Could not make the block: Linear is taken already" in e.value for e in at.error)
    assert not ed.blocks and len(_nodes(at)) == 13
    at.text_input(key="editor.make.name").set_value("conv_pair")
    at.button(key="editor.make").click().run()
    assert_no_exception(at)
    assert any(s.value.startswith("Made the block conv_pair from conv2d1, relu1, conv2d2, relu2") for s in at.success)
    nodes = _nodes(at)
    assert len(nodes) == 10 and "double" in nodes["convpair1"]["style"]["border"] and ed.selected == "convpair1"
    after = ed.analysis()
    assert ed.problems() == [] and after.total_params == before.total_params
    assert after.uses["convpair1"].output == before.nodes["relu2"].output
    at.button(key="editor.block.open.conv_pair").click().run()
    assert list(_nodes(at)) == ["x", "conv2d1", "relu1", "conv2d2", "relu2"]


@pytest.mark.parametrize("name", [e.name for e in zoo.entries() if zoo.template(e.name).model.blocks])
def test_every_zoo_block_opens_and_its_uses_show_their_params(app, name):
    template = zoo.template(name)
    at = app()
    at.selectbox(key="toolbar.template").set_value(name).run()
    at.button(key="toolbar.load").click().run()
    for block in template.model.blocks:
        use = next(n for n in template.model.nodes if n.op == block.name)
        fake_canvas_event(at, selected=use.id)
        for p in block.params:  # typed widgets showing the use's value (or the default)
            kind = "number_input" if p.type in ("int", "float") else "text_input"
            assert form(at, kind, f"param.{use.id}.{p.name}").value == use.params.get(p.name, p.default)
        at.button(key="editor.open_block").click().run()
        assert_no_exception(at)
        assert set(_nodes(at)) == {*block.inputs, *(n.id for n in block.nodes)}
        assert not any("⚠" in n["data"]["content"] for n in _nodes(at).values())
        at.button(key="editor.block.back").click().run()


def test_a_text_parameter_of_a_use_is_a_text_field(app):
    doc = json.loads(two_use_json())
    doc["model"]["blocks"][0]["params"].append({"name": "note", "type": "str", "default": "plain"})
    at = app()
    at.file_uploader(key=editor(at).upload_key).set_value(("note.json", json.dumps(doc).encode(), "application/json"))
    at.run()
    fake_canvas_event(at, selected="stage1")
    field = form(at, "text_input", "param.stage1.note")
    assert field.value == "plain"  # the default, shown
    field.set_value("wide <b>").run()
    assert_no_exception(at)
    assert editor(at).node("stage1")["data"]["params"]["note"] == "wide <b>"
    assert editor(at).problems() == []
