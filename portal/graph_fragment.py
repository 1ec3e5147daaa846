"""What the graph layer's fragment (``portal.editor_view.graph_part``) compares before it runs alone.

An edit made in the graph layer (a palette add, a parameter in the side form, a connection removed) reruns the
graph layer alone, not the page: the palette, the side form, the canvas and the validation line are about half
of the page's elements, and a run of the whole page after every edit was most of a palette add's time in the
browser (docs/performance.md, "Issue 21, edit latency: fourth pass"). What the rest of the page shows of the
graph is either drawn by the fragment itself into a place kept for it outside (the toolbar's export, the drafts
bar's "Saved" line: :class:`Slots`) or compared here: when an edit changed it (Undo became possible, a notice in
another layer, the data or training layer's fields, the draft's state), or when a widget outside the graph layer
changed in the same batch as the edit, the whole page runs instead (``st.rerun()``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState

from core.errors import Problem
from portal import drafts_view, example_data_view, start_weights
from portal.editor_state import Editor

FRAGMENT_KEY = "graph_layer"  # the fragment's name: the canvas' callback reruns it (portal.canvas._on_value)
OUTSIDE_MARK_KEY = "graph_part.outside_seen"  # what the page outside the graph layer showed at its last whole run


@dataclass(frozen=True)
class Slots:
    """Places outside the graph layer that its fragment fills on every run of it (Streamlit keeps a fragment's
    writes into an outside container in place, and redraws them when the fragment runs alone)."""

    export: DeltaGenerator  # the toolbar's "Export spec" button: the file is the document as it is now
    saved: DeltaGenerator | None  # the drafts bar's "Saved on the server · revision N" (no bar: None)


def running_alone() -> bool:
    """Whether the fragment this is called in runs alone (a widget of its own reran it), not inside a run of the
    page or of an enclosing fragment."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run
                and ThreadState.get().fragment_id in ctx.fragment_ids_this_run)


def registered_keys() -> frozenset[str]:
    """The widget keys drawn so far in this script run."""
    ctx = get_script_run_ctx()
    return ctx.shared.widget_user_keys_this_run.snapshot() if ctx is not None else frozenset()


def _document_part(ed: Editor) -> str:
    """The document outside the graph: its name, the data and training layers (forms outside the graph layer)."""
    doc = ed.doc
    return json.dumps([doc.get("name"), doc.get("description"), doc.get("data"), doc.get("training")],
                      sort_keys=True, default=str)


def outside_state(ed: Editor, need: Problem | None) -> tuple[Any, ...]:
    """What the page outside the graph layer shows that an edit in the graph layer can change (the draft's
    revision is not in it: the fragment draws that line itself, :class:`Slots`)."""
    b = drafts_view.binding()
    fit = start_weights.start_weights(ed)
    return (
        bool(ed.history), bool(ed.future), not ed.history and ed.rev == 0,  # Undo, Redo, the first-run guide open
        ed.form_version, tuple(ed.open_path), ed.imports,
        tuple(n.id for n in ed.notices if n.area != "graph"),
        _document_part(ed),
        (b.id, b.name, b.user, b.trouble, b.conflict, b.confirm_delete, b.widgets) if b is not None else None,
        start_weights.describe(fit) if fit is not None else None,  # the training layer's line about them
        example_data_view.target(ed) if need is not None else None,  # the data layer's "Generate example data"
    )


def _widget_values(keys: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The plain values (a button: True in the run its click caused) of the widgets under ``keys``."""
    state = st.session_state
    return tuple(sorted((k, repr(state[k])) for k in keys
                        if k in state and isinstance(state[k], (bool, int, float, str, type(None)))))


def mark_outside(ed: Editor, need: Problem | None, outside_keys: frozenset[str]) -> None:
    """At the end of a run of the whole page: what it showed outside the graph layer, and its widgets there."""
    st.session_state[OUTSIDE_MARK_KEY] = (outside_state(ed, need), outside_keys, _widget_values(outside_keys))


def outside_changed(ed: Editor, need: Problem | None) -> bool:
    """Whether the page outside the graph layer must be drawn again (:func:`changed`)."""
    mark = st.session_state.get(OUTSIDE_MARK_KEY)
    keys = mark[1] if isinstance(mark, tuple) else frozenset()
    return changed(mark, outside_state(ed, need), _widget_values(keys))


def changed(mark: Any, state: tuple[Any, ...], widgets: tuple[tuple[str, str], ...]) -> bool:
    """Whether what the page outside the graph layer shows of the editor (``state``) differs from the mark, or one
    of its widgets changed (a click that came in the same batch as the graph layer's own). A button is True only
    in the run its click caused: True in the mark and False now is the click that run showed."""
    if not isinstance(mark, tuple) or mark[0] != state:
        return True
    before = dict(mark[2])
    return any(before.get(k) != v and (before.get(k), v) != ("True", "False") for k, v in widgets)
