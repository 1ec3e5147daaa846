"""Issue 21's smaller items: messages that do not outlive what they are about, the template picker after
an import, readable one-point charts, a resumed run and its parent naming each other, help that says
where things are."""

from __future__ import annotations

import json
from pathlib import Path

from core import zoo
from portal.editor_state import Editor
from portal.editor_view import GUIDE
from portal.resume import Checkpoint, lineage, resumed_from, seed
from portal.users import default_local_user
from schedulers.base import JobStatus, RunState
from schedulers.registry.runs import RunRegistry
from tests.portal.conftest import as_the_browser, assert_no_exception, editor, messages


def test_a_refused_values_note_goes_once_the_field_holds_another_value():
    ed = Editor()
    ed.refuse_field("training.epochs", "Epochs: 0 is out of range. Kept 10.")
    ed.refuse_field("training.resources.nodes", "Nodes: -1 is out of range. Kept 1.")
    ed.set_field("training", ("epochs",), 5)  # corrected (typed, fitted, probed: any way)
    assert list(ed.field_errors) == ["training.resources.nodes"]
    ed.set_field("training", ("resources",), {**ed.doc["training"]["resources"], "nodes": 2})
    assert ed.field_errors == {}
    ed.refuse_field("training.epochs", "Epochs: 0 is out of range. Kept 5.")
    ed.undo()  # the document it was about is shown no more
    assert ed.field_errors == {}


def test_the_template_picker_is_empty_after_an_import(app):
    at = app()
    as_the_browser(at, lambda: at.selectbox(key="toolbar.template").set_value("lenet5"))
    as_the_browser(at, at.button(key="toolbar.load").click)
    assert at.selectbox(key="toolbar.template").value == "lenet5"
    at.file_uploader(key=editor(at).upload_key).set_value(
        ("mlp.json", zoo.template("mlp").to_json().encode(), "application/json"))
    at.run()
    assert_no_exception(at)
    assert editor(at).doc["name"] == "mlp" and at.selectbox(key="toolbar.template").value is None


def test_the_guide_says_the_template_picker_is_below_it():
    assert "above" not in GUIDE and "(the picker below)" in GUIDE


def _run(registry: RunRegistry, name: str, metrics: list[dict]) -> object:
    spec = zoo.template("mlp").model_copy(update={"name": name})
    run = registry.create_run(user=default_local_user(), spec_json=spec.to_json(), spec_hash=spec.spec_hash(),
                              framework="torch", scheduler="local", name=name)
    (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics), encoding="utf-8")
    registry.mark_submitted(run.id, "42")
    registry.record_status(run.id, JobStatus(job_id="42", state=RunState.FAILED, exit_code=1))
    registry.sync_metrics(run.id)
    return registry.get(run.id)


def test_a_one_point_chart_labels_its_axes_as_short_numbers(app, portal_env: Path):
    registry = RunRegistry(home=portal_env / "home")
    _run(registry, "short", [{"event": "epoch", "step": 9, "epoch": 0, "split": "val", "loss": 0.5}])
    at = app("pages/runs.py")
    charts = [json.loads(c.proto.spec) for c in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart")]
    [loss] = [c for c in charts if c["encoding"]["y"]["title"] == "loss"]
    assert loss["encoding"]["x"]["axis"]["format"] == "~d" and loss["encoding"]["y"]["axis"]["format"] == "~g"


def test_a_resumed_run_and_its_parent_name_each_other(app, portal_env: Path):
    registry = RunRegistry(home=portal_env / "home")
    parent = _run(registry, "long", [])
    child = _run(registry, "long", [])
    (parent.run_dir / "checkpoints").mkdir()
    (parent.run_dir / "checkpoints" / "ckpt-1200.pt").write_bytes(b"state")
    seed(child.run_dir, Checkpoint(1200, (parent.run_dir / "checkpoints" / "ckpt-1200.pt",)), parent=parent.id)
    assert resumed_from(child.run_dir) == (parent.id, 1200) and resumed_from(parent.run_dir) is None
    runs = [parent, child]
    assert lineage(child, runs) == f"Resumed from run {parent.id} at step 1,200."
    assert lineage(parent, runs) == f"Resumed as run {child.id}."
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(parent.id).run()
    assert any(c.value == f"Resumed as run {child.id}." for c in at.caption)
    at.selectbox(key="runs.selected").set_value(child.id).run()
    assert any(c.value == f"Resumed from run {parent.id} at step 1,200." for c in at.caption)


def test_example_data_for_a_text_template_keeps_it_valid(app):
    """A text table has no numeric feature: the probe records no sample shape, not (0,), which the
    validator refused (data.sample_shape[0]) until the template was loaded again."""
    at = app()
    as_the_browser(at, lambda: at.selectbox(key="toolbar.template").set_value("transformer_text_classifier"))
    as_the_browser(at, at.button(key="toolbar.load").click)
    as_the_browser(at, at.button(key="editor.example_data").click)
    ed = editor(at)
    assert ed.doc["data"]["size"] and ed.doc["data"]["sample_shape"] is None
    assert ed.problems() == []
    assert any(m.startswith(("Valid:", "Valid, but local has")) for m in messages(at))
