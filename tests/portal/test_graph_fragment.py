"""The graph layer's fragment runs alone only when the page outside it would show nothing new
(portal/graph_fragment.py): the mark a run of the whole page leaves, and the comparison a run of the fragment
alone makes with it. The fragment's own runs are a browser's (tests/browser/test_graph_fragment_e2e.py)."""

from __future__ import annotations

from typing import Any

from portal.graph_fragment import OUTSIDE_MARK_KEY, changed
from tests.portal.conftest import editor, form


def _mark(at: Any) -> tuple[Any, ...]:
    return at.session_state[OUTSIDE_MARK_KEY]


def test_what_the_page_outside_the_graph_layer_shows_changes_only_with_what_it_shows(app):
    at = app()
    first = _mark(at)
    at.button(key="palette.ReLU").click().run()  # the first edit: Undo is possible now
    after_one = _mark(at)
    assert changed(first, after_one[0], ())
    at.button(key="palette.Linear").click().run()  # another: nothing new outside the graph layer
    after_two = _mark(at)
    assert len(editor(at).nodes) == 4
    assert not changed(after_one, after_two[0], after_one[2])
    form(at, "number_input", "training.epochs").set_value(3).run()  # the training layer's form shows it
    assert changed(after_two, _mark(at)[0], after_two[2])
    # the graph layer's own widgets are not compared; the toolbar's are
    assert "palette.ReLU" not in after_two[1] and "toolbar.undo" in after_two[1]


def test_a_widget_outside_that_changed_in_the_same_batch_draws_the_page_again():
    state = (True, False, "doc")
    mark = (state, frozenset({"toolbar.load", "toolbar.template"}),
            (("toolbar.load", "True"), ("toolbar.template", "'mlp'")))
    # the click the mark's run showed is False now: nothing new
    assert not changed(mark, state, (("toolbar.load", "False"), ("toolbar.template", "'mlp'")))
    assert changed(mark, state, (("toolbar.load", "False"), ("toolbar.template", "'lenet5'")))  # a choice
    no_click = (state, mark[1], (("toolbar.load", "False"), ("toolbar.template", "'mlp'")))
    assert changed(no_click, state, (("toolbar.load", "True"), ("toolbar.template", "'mlp'")))  # a click
    assert changed(None, state, ())  # no run of the whole page has ended yet
