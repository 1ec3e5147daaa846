"""The canvas as the component receives it: readable nodes at the smallest zoom, a minimap for big
graphs, a top-to-bottom layout, the view kept across edits, labels that are text, no raw node menu."""

from __future__ import annotations

import re

from core import zoo
from portal.graph_layout import NODE_WIDTH_PX
from tests.portal.conftest import as_the_browser, canvas_args, editor, fake_canvas_event, form


def _load(at, name: str) -> None:
    at.selectbox(key="toolbar.template").set_value(name).run()
    as_the_browser(at, at.button(key="toolbar.load").click)


def _px(value: str) -> float:
    return float(re.fullmatch(r"([\d.]+)px", value).group(1))


def test_a_big_network_is_sent_readable_with_a_minimap(app):
    at = app()
    _load(at, "resnet18_cifar")
    args = canvas_args(at)
    # drawn with blocks: each residual block is one node (69 layers once expanded)
    assert len(args["nodes"]) == len(zoo.template("resnet18_cifar").model.nodes) == 15
    # the fitted zoom never goes below minZoom: the node text stays ≥ 10 px on screen
    assert all(_px(n["style"]["fontSize"]) * args["minZoom"] >= 10 for n in args["nodes"])
    assert {n["style"]["width"] for n in args["nodes"]} == {f"{NODE_WIDTH_PX}px"}
    assert args["showMiniMap"] is True and args["fitView"] is True
    # the component's own node menu (raw "Edit Node" dialog) and pane menu are off
    assert args["enableNodeMenu"] is False and args["enablePaneMenu"] is False


def test_a_small_graph_has_no_minimap(app):
    args = canvas_args(app())
    assert args["showMiniMap"] is False


def test_templates_are_laid_out_top_to_bottom(app):
    at = app()
    _load(at, "resnet18_cifar")
    pos = {n["id"]: n["position"] for n in canvas_args(at)["nodes"]}
    edges = canvas_args(at)["edges"]
    assert edges and all(pos[e["target"]]["y"] > pos[e["source"]]["y"] for e in edges)
    at.button(key="editor.layout").click().run()
    options = canvas_args(at)["layoutOptions"]["elkOptions"]
    assert (options["elk.algorithm"], options["elk.direction"]) == ("layered", "DOWN")
    assert canvas_args(at)["fitView"] is True


def test_an_edit_keeps_the_users_view_and_a_new_document_fits_it(app):
    at = app()
    _load(at, "lenet5")
    key, sent = editor(at).canvas_key, canvas_args(at)["timestamp"]
    fake_canvas_event(at)  # the component reports itself after mounting
    conv = next(n.id for n in zoo.template("lenet5").model.nodes if n.op == "Conv2d")
    fake_canvas_event(at, selected=conv)
    form(at, "number_input", f"param.{conv}.out_channels").set_value(8).run()
    args = canvas_args(at)
    assert editor(at).canvas_key == key, "the same component: the browser keeps its zoom and pan"
    assert args["fitView"] is False and args["timestamp"] > sent
    assert any(n["id"] == conv and "out\\_channels" not in n["data"]["content"] and "out_channels=8" in
               n["data"]["content"] for n in args["nodes"])
    _load(at, "mlp")
    assert editor(at).canvas_key != key and canvas_args(at)["fitView"] is True


def test_a_label_is_text_on_the_canvas(app):
    at = app()
    fake_canvas_event(at, selected="input")
    label = '<img src=x onerror="alert(1)"> ![pic](http://x/y.png) [link](javascript:alert(1)) $x^2$ **b**'
    form(at, "text_input", "editor.label.input").set_value(label).run()
    [content] = [n["data"]["content"] for n in canvas_args(at)["nodes"] if n["id"] == "input"]
    title = content.split("  \n")[0]
    # every Markdown or HTML character of the label is escaped: nothing but text can come out of it
    assert re.search(r"(?<!\\)[<>\[\]()!$*`]", title.removeprefix("**").split("** (")[0]) is None, title
    assert title.endswith("** (Input)")
