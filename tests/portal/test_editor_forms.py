"""The editor's forms are views of one document: a template, an import, undo or a run's spec
replaces the document, and the forms show it — the browser's remembered widget values never come
back into it (``as_the_browser`` plays what a browser sends after such a replacement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import zoo
from core.load import load_spec, spec_from_json
from core.spec import PipelineSpec
from tests.portal.conftest import as_the_browser, assert_no_exception, downloaded, editor, form

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))
EXPORT = "Export spec (JSON)"


def _comparable(spec: PipelineSpec) -> dict[str, Any]:
    """The spec without node positions (a template without positions is laid out when loaded, its
    blocks' nodes too)."""
    doc = spec.model_dump(mode="json")
    for node in doc["model"]["nodes"] + [n for b in doc["model"]["blocks"] for n in b["nodes"]]:
        node.pop("position", None)
    return doc


def _load_template(at, name: str) -> None:
    at.selectbox(key="toolbar.template").set_value(name).run()
    as_the_browser(at, at.button(key="toolbar.load").click)


def _import(at, path: Path) -> None:
    upload = (path.name, path.read_bytes(), "application/json")
    as_the_browser(at, lambda: at.file_uploader(key=editor(at).upload_key).set_value(upload))


@pytest.mark.parametrize("name", [e.name for e in zoo.entries()])
def test_a_loaded_template_is_exported_unchanged(app, downloads, name):
    at = app()
    _load_template(at, name)
    exported = spec_from_json(downloaded(at, downloads, EXPORT), source="export")
    assert _comparable(exported) == _comparable(zoo.template(name))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_an_imported_example_is_exported_unchanged(app, downloads, path):
    at = app()
    _load_template(at, "lenet5")  # other values in every form first
    _import(at, path)
    exported = spec_from_json(downloaded(at, downloads, EXPORT), source="export")
    assert _comparable(exported) == _comparable(load_spec(path))


def test_lenet5_keeps_its_training_and_the_forms_show_it(app):
    at = app()
    _load_template(at, "lenet5")
    t = editor(at).spec().training
    want = zoo.template("lenet5")
    assert editor(at).doc["name"] == "lenet5" and form(at, "text_input", "meta.name").value == "lenet5"
    assert (t.epochs, t.schedule.name) == (12, "cosine") == (want.training.epochs, want.training.schedule.name)
    assert t.optimizer.weight_decay == want.training.optimizer.weight_decay > 0
    assert t.resources.time_limit_min == want.training.resources.time_limit_min
    assert editor(at).spec().data.validation_split == want.data.validation_split
    assert form(at, "number_input", "training.epochs").value == 12
    assert form(at, "selectbox", "training.schedule.name").value == "cosine"
    assert form(at, "number_input", "training.optimizer.weight_decay").value == want.training.optimizer.weight_decay
    assert form(at, "number_input", "training.resources.time_limit_min").value == want.training.resources.time_limit_min
    assert form(at, "number_input", "data.validation_split").value == want.data.validation_split


def test_resnet18_cifar_keeps_its_data_layer(app):
    at = app()
    _load_template(at, "mnist_cnn")
    _load_template(at, "resnet18_cifar")
    data = editor(at).spec().data
    want = zoo.template("resnet18_cifar").data
    assert (data.input_shape, data.batch_size, data.num_classes) == (want.input_shape, want.batch_size,
                                                                     want.num_classes)
    assert form(at, "text_input", "data.input_shape").value == "3, 32, 32"
    assert form(at, "number_input", "data.batch_size").value == want.batch_size
    assert form(at, "number_input", "data.num_classes").value == want.num_classes
    assert not [p for p in editor(at).problems() if p.node is not None], "the graph must be valid as loaded"


def test_undo_and_a_new_pipeline_show_the_restored_document(app):
    at = app()
    _load_template(at, "lenet5")
    as_the_browser(at, at.button(key="toolbar.new").click)
    assert editor(at).doc["name"] == "pipeline" and editor(at).spec().training.epochs == 10
    as_the_browser(at, at.button(key="toolbar.undo").click)
    assert editor(at).doc["name"] == "lenet5" and editor(at).spec().training.epochs == 12
    assert form(at, "number_input", "training.epochs").value == 12


def test_a_form_edit_after_a_template_changes_only_that_field(app):
    at = app()
    _load_template(at, "lenet5")
    before = _comparable(editor(at).spec())
    as_the_browser(at, lambda: form(at, "number_input", "training.epochs").set_value(3))
    after = _comparable(editor(at).spec())
    assert after["training"].pop("epochs") == 3
    before["training"].pop("epochs")
    assert after == before


def test_open_in_editor_replaces_the_forms_too(app, portal_env):
    from portal.users import default_local_user
    from schedulers.registry.runs import RunRegistry

    spec = zoo.template("lenet5").model_copy(update={"name": "from-a-run"})
    registry = RunRegistry(home=portal_env / "home")
    run = registry.create_run(user=default_local_user(), spec_json=spec.to_json(), spec_hash=spec.spec_hash(),
                              framework="torch", scheduler="local", name=spec.name)
    at = app()
    _load_template(at, "mlp")
    at.switch_page("pages/runs.py").run()
    at.selectbox(key="runs.selected").set_value(run.id).run()
    at.button(key="runs.open").click().run()
    at.switch_page("pages/editor.py").run()
    as_the_browser(at, lambda: None)
    assert _comparable(editor(at).spec()) == _comparable(spec)
    assert form(at, "number_input", "training.epochs").value == 12


def test_a_field_changed_together_with_loading_a_template_does_not_reach_the_template(app):
    """The browser sends a typed, not yet confirmed value together with the click that follows it;
    Streamlit runs the button's callback and then the field's: the field showed the old document."""
    at = app()
    at.selectbox(key="toolbar.template").set_value("resnet18_cifar").run()
    form(at, "number_input", "data.batch_size").set_value(7)
    form(at, "text_input", "meta.name").set_value("typed")
    at.button(key="toolbar.load").click().run()
    assert_no_exception(at)
    assert editor(at).spec().data.batch_size == zoo.template("resnet18_cifar").data.batch_size
    assert form(at, "number_input", "data.batch_size").value == zoo.template("resnet18_cifar").data.batch_size
