"""The editor page through AppTest: the real app.py, widgets driven like a user, canvas events faked."""

from __future__ import annotations

import json

from core import zoo
from tests.portal.conftest import assert_no_exception, canvas_args, edge, editor, fake_canvas_event, form, messages


def _node_ids(at) -> list[str]:
    return [n["id"] for n in canvas_args(at)["nodes"]]


def _content(at, node_id: str) -> str:
    return next(n["data"]["content"] for n in canvas_args(at)["nodes"] if n["id"] == node_id)


def test_editor_renders_three_layers_and_a_canvas(app):
    at = app()
    headers = [h.value for h in at.subheader]
    assert headers[:3] == ["1 · Data layer", "2 · Graph layer", "3 · Training layer"]
    assert _node_ids(at) == ["input", "output"]
    args = canvas_args(at)
    assert args["allowNewEdges"] is True and args["enablePaneMenu"] is False
    # Input and Output are not connected yet: both are marked, with the reason on the node.
    assert "⚠" in _content(at, "output")
    assert any("problem(s)" in m for m in messages(at))


def test_palette_adds_nodes_grouped_by_family(app):
    at = app()
    expanders = [e.label for e in at.expander]
    assert {"Input / output", "Convolution", "Pooling", "Dense", "Activation"} <= set(expanders)
    key_before = editor(at).canvas_key
    at.button(key="palette.Conv2d").click().run()
    assert_no_exception(at)
    assert "conv2d1" in _node_ids(at)
    # a new node: sent to the same canvas (no remount) with its view fitted, so the node is in sight; it is selected
    assert editor(at).canvas_key == key_before and canvas_args(at)["fitView"] is True
    assert form(at, "selectbox", "editor.selected.conv2d1").value == "conv2d1"
    assert editor(at).node("conv2d1")["data"]["params"] == {"out_channels": 32, "kernel_size": 3}


def test_faked_canvas_connections_give_shapes_on_nodes(app):
    at = app()
    for op in ("Conv2d", "ReLU", "Flatten", "Linear"):
        at.button(key=f"palette.{op}").click().run()
    chain = ["input", "conv2d1", "relu1", "flatten1", "linear1", "output"]
    fake_canvas_event(at, edges=[edge(a, b) for a, b in zip(chain, chain[1:])])
    ed = editor(at)
    assert [(e["source"], e["target"]) for e in ed.edges] == list(zip(chain, chain[1:]))
    # digits are 1×8×8: conv 3×3 → 32×6×6 → flatten 1152 → linear 64; 64 ≠ 10 classes is flagged on Output
    assert "32×6×6" in _content(at, "conv2d1")
    assert "1152" in _content(at, "flatten1")
    assert "⚠" in _content(at, "output") and "classes" in _content(at, "output")
    # the side form drives the parameter: out_features 10 makes the graph valid
    form(at, "selectbox", f"editor.selected.{ed.selected}").set_value("linear1").run()
    form(at, "number_input", "param.linear1.out_features").set_value(10).run()
    assert_no_exception(at)
    assert ed.node("linear1")["data"]["params"]["out_features"] == 10
    assert "→ 10" in _content(at, "linear1")
    assert any(m.startswith("Valid:") for m in messages(at))
    spec = ed.valid_spec()
    assert [n.op for n in spec.model.nodes] == ["Input", "Output", "Conv2d", "ReLU", "Flatten", "Linear"]


def test_a_cycle_drawn_on_the_canvas_is_refused_with_a_message(app):
    at = app()
    at.button(key="palette.ReLU").click().run()
    at.button(key="palette.Tanh").click().run()
    fake_canvas_event(at, edges=[edge("input", "relu1"), edge("relu1", "tanh1")])
    fake_canvas_event(at, edges=[edge("input", "relu1"), edge("relu1", "tanh1"), edge("tanh1", "relu1")])
    errors = [e.value for e in at.error]
    assert any("cycle" in e and "tanh1 → relu1" in e for e in errors), errors
    ed = editor(at)
    assert ("tanh1", "relu1") not in [(e["source"], e["target"]) for e in ed.edges]
    # Python's edges are sent again, newer than the browser's event, so the refused edge disappears there
    assert canvas_args(at)["timestamp"] > ed.last_event_ts
    assert edge("tanh1", "relu1")["id"] not in [e["id"] for e in canvas_args(at)["edges"]]


def test_a_cycle_made_from_the_side_form_is_refused_too(app):
    at = app()
    at.button(key="palette.ReLU").click().run()
    at.selectbox(key="editor.connect_from").set_value("input").run()
    at.button(key="editor.connect").click().run()
    form(at, "selectbox", "editor.selected.relu1").set_value("input").run()
    # Input takes no inputs: its form has no "connect from"; select relu1 → connect from output, then back
    at.button(key="palette.Tanh").click().run()
    at.selectbox(key="editor.connect_from").set_value("relu1").run()
    at.button(key="editor.connect").click().run()
    form(at, "selectbox", "editor.selected.tanh1").set_value("relu1").run()
    at.selectbox(key="editor.connect_from").set_value("tanh1").run()
    at.button(key="editor.connect").click().run()
    assert_no_exception(at)
    assert any("cycle" in e.value for e in at.error)


def test_canvas_deletions_moves_and_dangling_edges(app):
    at = app()
    at.button(key="palette.ReLU").click().run()
    fake_canvas_event(at, edges=[edge("input", "relu1"), edge("relu1", "output")])
    nodes = canvas_args(at)["nodes"]
    moved = [dict(n, position={"x": 300.0, "y": 40.0}) if n["id"] == "relu1" else n for n in nodes]
    key = editor(at).canvas_key
    fake_canvas_event(at, nodes=moved, edges=canvas_args(at)["edges"])
    assert editor(at).node("relu1")["position"] == {"x": 300.0, "y": 40.0}
    assert editor(at).canvas_key == key, "a drag must not remount the canvas"
    # "Delete Node" in the browser: the node is gone, its edge to output still listed (dangling)
    remaining = [n for n in canvas_args(at)["nodes"] if n["id"] != "relu1"]
    fake_canvas_event(at, nodes=remaining, edges=[edge("relu1", "output")])
    ed = editor(at)
    assert not ed.has_node("relu1") and ed.edges == []
    # a node made with the canvas' pane menu has no op: refused with a message
    stray = {"id": "st-flow-node_abc", "position": {"x": 0, "y": 0}, "data": {"content": "New node"}}
    fake_canvas_event(at, nodes=[*canvas_args(at)["nodes"], stray], edges=[])
    assert not ed.has_node("st-flow-node_abc")
    assert any("palette" in w.value for w in at.warning)


def test_node_click_selects_and_the_form_shows_help_and_shape(app):
    at = app()
    at.button(key="palette.MaxPool2d").click().run()
    at.button(key="palette.Flatten").click().run()
    fake_canvas_event(at, edges=[edge("input", "maxpool2d1")], selected="input")
    assert editor(at).selected == "input"
    fake_canvas_event(at, selected="maxpool2d1")
    assert editor(at).selected == "maxpool2d1"
    assert any("Output **1×4×4**" in m.value for m in at.markdown)
    assert form(at, "text_input", "param.maxpool2d1.kernel_size").value == "2"
    form(at, "text_input", "param.maxpool2d1.kernel_size").set_value("3, 3").run()
    assert editor(at).node("maxpool2d1")["data"]["params"]["kernel_size"] == [3, 3]
    form(at, "text_input", "param.maxpool2d1.kernel_size").set_value("three").run()
    assert any("kernel_size" in e.value for e in at.error)
    assert editor(at).node("maxpool2d1")["data"]["params"]["kernel_size"] == [3, 3]
    # the edge id the component uses when a connection is drawn counts as no node selection
    fake_canvas_event(at, selected="st-flow-edge_input-maxpool2d1")
    assert editor(at).selected == "maxpool2d1"


def test_add_and_concat_have_ordered_ports(app):
    at = app()
    for op in ("ReLU", "Tanh", "Concat"):
        at.button(key=f"palette.{op}").click().run()
    fake_canvas_event(at, edges=[edge("input", "relu1"), edge("input", "tanh1"), edge("tanh1", "concat1"),
                                 edge("relu1", "concat1")], selected="concat1")
    ed = editor(at)
    assert ed.incoming("concat1") == ["tanh1", "relu1"]
    assert "ports: 0:tanh1, 1:relu1" in _content(at, "concat1")
    at.button(key="editor.down.concat1.tanh1").click().run()
    assert ed.incoming("concat1") == ["relu1", "tanh1"]
    spec = ed.spec()
    ports = {(e.source, e.port) for e in spec.model.edges if e.target == "concat1"}
    assert ports == {("relu1", 0), ("tanh1", 1)}


def test_data_layer_form_drives_the_spec(app):
    at = app()
    form(at, "number_input", "data.batch_size").set_value(32).run()
    form(at, "number_input", "data.validation_split").set_value(0.25).run()
    form(at, "selectbox", "data.builtin").set_value("sklearn:iris").run()
    assert_no_exception(at)
    spec = editor(at).spec()
    assert spec.data.batch_size == 32 and spec.data.validation_split == 0.25
    assert spec.data.source == "sklearn:iris"
    assert any("150 samples" in s.value for s in at.success)
    at.selectbox(key="editor.add_preprocessing").set_value("scale").run()
    at.button(key="editor.add_preprocessing_btn").click().run()
    form(at, "text_input", "step.preprocessing.0.scale.max_value").set_value("7.9").run()
    at.selectbox(key="editor.add_augmentation").set_value("gaussian_noise").run()
    at.button(key="editor.add_augmentation_btn").click().run()
    spec = editor(at).spec()
    assert spec.data.preprocessing[0].model_dump() == {"op": "scale", "max_value": 7.9}
    assert spec.data.augmentation[0].op == "gaussian_noise"
    at.button(key="editor.rm_preprocessing_0").click().run()
    assert editor(at).spec().data.preprocessing == []


def test_file_sources_are_confined_to_the_data_roots(app, portal_env):
    (portal_env / "data" / "tables").mkdir()
    (portal_env / "data" / "tables" / "t.csv").write_text("a,b,label\n1,2,0\n3,4,1\n5,6,0\n", encoding="utf-8")
    (portal_env / "secret.csv").write_text("a,label\n1,0\n", encoding="utf-8")
    (portal_env / "data" / "escape.csv").symlink_to(portal_env / "secret.csv")
    at = app()
    form(at, "radio", "editor.source_mode").set_value("File under my data roots").run()
    at.text_input(key="data.path").set_value("tables/t.csv").run()
    at.button(key="editor.use_file").click().run()
    assert_no_exception(at)
    data = editor(at).spec().data
    assert data.source == str((portal_env / "data" / "tables" / "t.csv").resolve())
    assert data.size == 3 and data.format == "csv"
    for bad in ("../secret.csv", "escape.csv", str(portal_env / "secret.csv")):
        at.text_input(key="data.path").set_value(bad).run()
        at.button(key="editor.use_file").click().run()
        assert any("data roots" in e.value or "'..'" in e.value for e in at.error), bad
        assert editor(at).spec().data.source == data.source


def test_training_layer_form_drives_the_spec(app):
    at = app()
    form(at, "number_input", "training.epochs").set_value(3).run()
    form(at, "number_input", "training.resources.gpus_per_node").set_value(2).run()
    form(at, "selectbox", "training.framework").set_value("torch").run()
    form(at, "selectbox", "training.optimizer.name").set_value("sgd").run()
    form(at, "number_input", "training.optimizer.lr").set_value(0.05).run()
    form(at, "selectbox", "training.schedule.name").set_value("step").run()
    form(at, "number_input", "training.schedule.step_size").set_value(4).run()
    form(at, "text_input", "training.resources.partition").set_value("gpu").run()
    form(at, "number_input", "training.samples_per_epoch").set_value(500).run()
    assert_no_exception(at)
    t = editor(at).spec().training
    assert (t.epochs, t.resources.gpus_per_node, t.framework, t.optimizer.name) == (3, 2, "torch", "sgd")
    assert t.optimizer.lr == 0.05 and t.schedule.name == "step" and t.schedule.step_size == 4
    assert t.resources.partition == "gpu" and t.samples_per_epoch == 500


def test_template_undo_import_export(app):
    at = app()
    at.selectbox(key="toolbar.template").set_value("mnist_cnn").run()
    at.button(key="toolbar.load").click().run()
    assert_no_exception(at)
    ed = editor(at)
    assert len(ed.nodes) == len(zoo.template("mnist_cnn").model.nodes)
    assert any(m.startswith("Valid:") for m in messages(at))
    assert form(at, "number_input", "data.validation_split").value == 0.2  # the widget shows the template's value
    [exported] = [b for b in at.get("download_button") if b.proto.label == "Export spec (JSON)"]
    assert not exported.proto.disabled and exported.proto.url.endswith(".json")  # a valid pipeline can be saved
    spec = ed.valid_spec()
    assert spec.model == zoo.template("mnist_cnn").model.model_copy(update={"nodes": spec.model.nodes})
    # undo brings the blank pipeline back
    at.button(key="toolbar.undo").click().run()
    assert [n["id"] for n in ed.nodes] == ["input", "output"]
    # import a spec file
    doc = json.loads(zoo.template("lenet5").to_json())
    at.file_uploader(key=editor(at).upload_key).set_value(("lenet.json", json.dumps(doc).encode(), "application/json"))
    at.run()
    assert_no_exception(at)
    assert ed.doc["name"] == "lenet5" and len(ed.nodes) == len(doc["model"]["nodes"])
    # a broken file is refused with the problems listed, the pipeline kept
    at.file_uploader(key=editor(at).upload_key).set_value(("bad.json", b'{"model": {"nodes": 3}}', "application/json"))
    at.run()
    assert any("Could not import bad.json" in e.value for e in at.error)
    assert ed.doc["name"] == "lenet5"


def test_undo_of_a_canvas_edge_and_auto_layout(app):
    at = app()
    fake_canvas_event(at, edges=[edge("input", "output")])
    assert editor(at).edges
    at.button(key="toolbar.undo").click().run()
    assert editor(at).edges == []
    at.button(key="editor.layout").click().run()
    assert_no_exception(at)
    assert canvas_args(at)["fitView"]  # laid out here (skip edges kept visible), no ELK in the browser


def test_widgets_survive_page_switches(app):
    at = app()
    form(at, "number_input", "data.batch_size").set_value(16).run()
    at.switch_page("pages/runs.py").run()
    at.switch_page("pages/editor.py").run()
    assert_no_exception(at)
    assert form(at, "number_input", "data.batch_size").value == 16
