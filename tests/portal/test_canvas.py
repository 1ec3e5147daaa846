"""The canvas as the component receives it: a layout readable at the fitted zoom, skip edges in
columns of their own, a zoom that shows 500 nodes whole, a minimap for big graphs, the view kept
across edits, labels that are text, no raw node menu."""

from __future__ import annotations

import re

from core import zoo
from core.block_expansion import expand
from portal.canvas import CANVAS_HEIGHT, MIN_ZOOM
from portal.graph_layout import CANVAS_PLAN_PX, NODE_WIDTH_PX, NODE_Y_STEP, layered_positions
from tests.portal.conftest import as_the_browser, canvas_args, editor, fake_canvas_event, form

NODE_HEIGHT_PX = 60  # a node of three lines


def _box(pos: dict[str, tuple[float, float]]) -> tuple[float, float]:
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    return max(xs) - min(xs) + NODE_WIDTH_PX, max(ys) - min(ys) + NODE_HEIGHT_PX


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
    # laid out (in columns) so that the zoom fitting it into the canvas keeps its text ≥ 10 px on screen
    width, height = _box({n["id"]: (n["position"]["x"], n["position"]["y"]) for n in args["nodes"]})
    fitted = min(CANVAS_PLAN_PX[0] / width, CANVAS_PLAN_PX[1] / height)
    assert all(_px(n["style"]["fontSize"]) * fitted >= 10 for n in args["nodes"])
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
    # top to bottom, in two columns: one edge goes from the first one's foot to the top of the second
    down = [e for e in edges if pos[e["target"]]["y"] > pos[e["source"]]["y"]]
    assert edges and len(edges) - len(down) == 1
    at.button(key="editor.layout").click().run()
    assert canvas_args(at)["layoutOptions"]["elkOptions"]["elk.algorithm"] == "org.eclipse.elk.fixed"  # Python's, not ELK's
    assert canvas_args(at)["fitView"] is True


def test_skip_edges_run_down_a_column_no_node_stands_in():
    flat = expand(zoo.template("resnet18"))  # 8 residual blocks, their shortcuts skipping 3–5 rows
    nodes = [{"id": n.id} for n in flat.model.nodes]
    edges = [{"source": e.source, "target": e.target} for e in flat.model.edges]
    pos = layered_positions(nodes, edges)
    skips = [e for e in edges if pos[e["target"]][1] - pos[e["source"]][1] > NODE_Y_STEP]
    assert len(skips) >= 8
    for e in skips:
        (x, top), (x2, bottom) = pos[e["source"]], pos[e["target"]]
        assert x == x2, e  # straight down
        assert not [n for n, (nx, ny) in pos.items() if nx == x and top < ny < bottom], e


def test_500_nodes_fit_the_canvas_whole_at_the_smallest_zoom():
    nodes = [{"id": f"n{i}"} for i in range(500)]
    edges = [{"source": f"n{i}", "target": f"n{i + 1}"} for i in range(499)]
    width, height = _box(layered_positions(nodes, edges))
    assert width * MIN_ZOOM < CANVAS_PLAN_PX[0] and height * MIN_ZOOM < CANVAS_HEIGHT
    assert 0.5 < width / height < 2  # wrapped into columns: not one 60,000 px column


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
