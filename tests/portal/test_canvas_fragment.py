"""The canvas' fragment: drawn at one place whatever the page shows above it, and the page drawn again when a run
of the fragment alone carried a change to the rest of the page (portal/canvas.py, docs/streamlit-flow.md).

Streamlit names a fragment after the position of the container it is drawn in. The canvas in the browser sends
its values under the name it was last drawn with; had a notice or a caption above the graph layer moved the
canvas, a click sent before the browser heard of the move named a fragment Streamlit no longer knew, and nothing
ran (CI: "waited 60 s for a script run to end after the action" after a click on a node).
"""

from __future__ import annotations

from typing import Any

from streamlit.testing.v1 import AppTest

from portal.canvas import _page_changed
from tests.portal.conftest import editor, fake_canvas_event


def _path_of_canvas(at: AppTest) -> tuple[int, ...]:
    """Where the canvas is in the page's element tree (child indices from the root)."""
    found: list[tuple[int, ...]] = []

    def walk(node: Any, path: tuple[int, ...]) -> None:
        if getattr(node, "type", None) == "component_instance" and "streamlit_flow" in node.proto.component_name:
            found.append(path)
        for index, child in (getattr(node, "children", None) or {}).items():
            walk(child, path + (index,))

    walk(at._tree, ())
    assert len(found) == 1, f"expected one canvas, found {len(found)}"
    return found[0]


def test_the_canvas_stays_where_it_is_whatever_the_page_shows_above_it(app):
    at = app()
    place = _path_of_canvas(at)  # the container the fragment is drawn in (what Streamlit names it after), and in it
    seen = {"first run": place}
    at.selectbox(key="toolbar.template").select("mnist_cnn").run()  # a caption under the picker
    seen["a template chosen"] = _path_of_canvas(at)
    at.button(key="toolbar.load").click().run()  # a notice in the toolbar, a larger graph
    seen["a template loaded"] = _path_of_canvas(at)
    at.file_uploader(key=editor(at).upload_key).set_value(("broken.json", b'{"model": ', "application/json")).run()
    seen["an import refused"] = _path_of_canvas(at)  # an error notice in the toolbar
    fake_canvas_event(at, selected="conv2d1")  # the side form of a node
    seen["a node selected"] = _path_of_canvas(at)
    assert set(seen.values()) == {place}, f"the canvas moved: {seen}"


def _state(rev: int = 3, **widgets: Any) -> tuple[Any, ...]:
    return rev, "relu1", ("n1",), 2, tuple(sorted((k, repr(v)) for k, v in widgets.items()))


def test_a_run_of_the_canvas_alone_draws_the_page_again_only_for_a_change_to_it():
    mark = _state(**{"toolbar.load": False, "toolbar.template": "mlp", "editor.layout": True})
    assert not _page_changed(mark, _state(**{"toolbar.load": False, "toolbar.template": "mlp"}))
    # the button clicked in the run that made the mark is False now: that click was shown already
    assert not _page_changed(mark, _state(**{"toolbar.load": False, "toolbar.template": "mlp", "editor.layout": False}))
    # a click that came in the same batch as a canvas value; a choice; the editor's own part
    assert _page_changed(mark, _state(**{"toolbar.load": True, "toolbar.template": "mlp"}))
    assert _page_changed(mark, _state(**{"toolbar.load": False, "toolbar.template": "mnist_cnn"}))
    assert _page_changed(mark, _state(rev=4, **{"toolbar.load": False, "toolbar.template": "mlp"}))
    assert _page_changed(None, _state())  # no run of the whole page has ended yet
