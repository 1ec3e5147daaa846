"""Messages stay until the user acts or dismisses them, and a refused value says why next to its field."""

from __future__ import annotations

from typing import Any

from streamlit.testing.v1.element_tree import Error

from core import zoo
from portal.forms import wkey
from tests.portal.conftest import as_the_browser, editor, fake_canvas_event, form


def _walk(node: Any):
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _walk(child)


def _right_after(at, key: str) -> str:
    """The text of the first error drawn after the widget with this key (in page order)."""
    seen = False
    for node in _walk(at.main):
        if getattr(node, "key", None) == key:
            seen = True
        elif seen and isinstance(node, Error):
            return node.value
    raise AssertionError(f"no message after {key}")


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


def _load(at, name: str) -> None:
    at.selectbox(key="toolbar.template").set_value(name).run()
    as_the_browser(at, at.button(key="toolbar.load").click)


def test_an_import_error_stays_until_dismissed_and_an_import_replaces_it(app):
    at = app()
    at.file_uploader(key=editor(at).upload_key).set_value(("broken.json", b'{"model": ', "application/json")).run()
    message = "Could not import broken.json"
    assert any(message in e for e in _errors(at))
    at.run()  # reruns the user did not cause (the canvas remounting, a fragment) keep it
    fake_canvas_event(at)
    at.number_input(key=wkey(editor(at), "data.batch_size")).set_value(32).run()  # an unrelated edit too
    assert any(message in e for e in _errors(at))
    [notice] = editor(at).notices_in("toolbar")
    at.button(key=f"notice.{notice.id}").click().run()
    assert not any(message in e for e in _errors(at))
    # a refused file, then a good one: the newer message replaces the older
    at.file_uploader(key=editor(at).upload_key).set_value(("broken.json", b"[]", "application/json")).run()
    good = zoo.template("mlp").to_json().encode()
    at.file_uploader(key=editor(at).upload_key).set_value(("mlp.json", good, "application/json")).run()
    assert not any("broken.json" in e for e in _errors(at))
    assert [s.value for s in at.success if s.value.startswith("Imported")] == ["Imported mlp.json."]
    at.run()
    assert [s.value for s in at.success if s.value.startswith("Imported")] == ["Imported mlp.json."]


def test_the_same_file_imported_again_is_imported_again(app):
    at = app()
    good = zoo.template("mlp").to_json().encode()
    at.file_uploader(key=editor(at).upload_key).set_value(("mlp.json", good, "application/json")).run()
    form(at, "number_input", "training.epochs").set_value(3).run()
    assert editor(at).spec().training.epochs == 3
    at.file_uploader(key=editor(at).upload_key).set_value(("mlp.json", good, "application/json")).run()
    assert editor(at).spec().training.epochs == zoo.template("mlp").training.epochs


def test_deeply_nested_json_is_refused_in_words(app):
    at = app()
    deep = b'{"model": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    at.file_uploader(key=editor(at).upload_key).set_value(("deep.json", deep, "application/json")).run()
    [error] = [e for e in _errors(at) if "deep.json" in e]
    assert "RecursionError" not in error and "nested" in error


def test_a_template_message_stays_and_a_data_path_refusal_stays(app, portal_env):
    at = app()
    _load(at, "mnist_cnn")
    at.run()
    fake_canvas_event(at)
    assert "Loaded the template mnist_cnn." in [s.value for s in at.success]
    at.radio(key=wkey(editor(at), "editor.source_mode")).set_value("File under my data roots").run()
    at.text_input(key="data.path").set_value("../secret.csv").run()
    at.button(key="editor.use_file").click().run()
    at.run()
    fake_canvas_event(at)
    assert any("'..'" in e for e in _errors(at))
    (portal_env / "data" / "t.csv").write_text("a,label\n1,0\n2,1\n", encoding="utf-8")
    at.text_input(key="data.path").set_value("t.csv").run()
    at.button(key="editor.use_file").click().run()  # the user did what it asked: the refusal goes
    assert not any("'..'" in e for e in _errors(at))


def test_out_of_range_numbers_are_refused_next_to_the_field(app):
    at = app()
    _load(at, "lenet5")
    epochs = form(at, "number_input", "training.epochs")
    as_the_browser(at, lambda: epochs.set_value(1_000_000_000))
    assert editor(at).spec().training.epochs == 12
    assert form(at, "number_input", "training.epochs").value == 12, "the field shows what the pipeline keeps"
    text = _right_after(at, wkey(editor(at), "training.epochs"))
    assert text.startswith("Epochs: 1,000,000,000 is out of range") and "1 to 100,000" in text and "Kept 12" in text
    at.run()
    fake_canvas_event(at)
    assert _right_after(at, wkey(editor(at), "training.epochs")) == text
    # a value in range is taken, and the message goes
    form(at, "number_input", "training.epochs").set_value(20).run()
    assert editor(at).spec().training.epochs == 20 and not any(e.startswith("Epochs:") for e in _errors(at))


def test_an_out_of_range_parameter_is_refused_next_to_it(app):
    at = app()
    _load(at, "mlp")
    last = next(n.id for n in zoo.template("mlp").model.nodes if n.op == "Linear"
                and n.params.get("out_features") == 10)
    fake_canvas_event(at, selected=last)
    name = f"param.{last}.out_features"
    as_the_browser(at, lambda: form(at, "number_input", name).set_value(10**12))
    assert editor(at).node(last)["data"]["params"]["out_features"] == 10
    assert form(at, "number_input", name).value == 10
    text = _right_after(at, wkey(editor(at), name))
    assert text.startswith("out_features: 1,000,000,000,000") and "1,000,000" in text and "keeps 10" in text
    assert any(m.value.startswith("Output **10**") for m in at.markdown), "the node still has 10 outputs"
