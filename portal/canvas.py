"""The streamlit-flow canvas, rendered so that Python-side edits are never lost (the stale-state race)
and a real network stays readable.

See ``docs/streamlit-flow.md``: a Python-side change is sent to the same component with a timestamp
newer than its last update (the user's zoom and pan stay; a node added from the palette is sent with
the view fitted to the graph, so the new node is in sight: the component cannot be told to pan to one);
a new graph (template, import, undo, auto-layout) remounts it under a new key with its view fitted. A
value read back under the current key is applied once, as changes to the state it started from (each
node is sent tagged with its state's timestamp). :func:`read_event` runs at the top of the page (before
anything is drawn from the document) and :func:`fragment` where the canvas belongs: what the component
sends reruns only the canvas (a drag) or the graph layer's fragment (a connection, a click:
portal/graph_fragment.py) unless the rest of the page must change. The component as served
(portal/flow_component.py) no longer answers the states Python sends
(docs/performance.md has the latencies).

Readable at any size: nodes have a fixed width and a 14 px font (``portal.graph_layout.NODE_STYLE``);
a graph is laid out so that it fits the canvas at a readable zoom where it can (a long one wrapped
into columns, skip edges in columns of their own: portal/graph_layout.py), a new graph is fitted
into view whole, and the smallest zoom (``MIN_ZOOM``) shows a 500-node graph whole (the minimap,
shown from ``MINIMAP_FROM`` nodes, and the zoom controls sit inside the canvas). Only the side
form edits a node: the component's own node menu ("Edit Node" wrote raw Markdown into the node and
bypassed every check) is off.

The canvas and the model never disagree: every change the component reports (a connection drawn, a
drag, a click) goes through :meth:`Editor.apply_canvas_value`. The component's keyboard delete
(Backspace) removes a selected node or edge in the browser *without telling Python*, so the next
Python-side update put it back; nodes and edges are therefore sent ``deletable=False``, which switches
keyboard deletion off, and the edge menu (whose one useful item, Delete Edge, needs a deletable edge) is
off too. Deleting goes through the side form: *Delete node*, and ✕ beside a connection.
"""

from __future__ import annotations

import functools
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState
from streamlit_flow.layouts import ManualLayout

from core.errors import FlowTrainError
from portal import flow_component
from portal.canvas_merge import SENT_KEY
from portal.editor_state import CANVAS_KEY_PREFIX, Editor

CANVAS_HEIGHT = 800
MIN_ZOOM = 0.02  # a 2,000-node graph laid out by portal/graph_layout.py fits the canvas whole
MINIMAP_FROM = 12  # nodes; fewer fit the canvas at a readable zoom
LAYOUT = ManualLayout().__to_dict__()  # ELK "fixed": the positions Python sends

# The component itself (streamlit-flow-component 1.6.1, pinned; served by portal/flow_component.py with the last
# click carried on every value): its ``streamlit_flow()`` wrapper sends every node and edge with all of its keys,
# most of them React Flow's defaults (about 1 KB a node; 500 KB for 500 nodes, sent again on each of the script runs
# an edit causes); :func:`payload` sends only what differs.
PAGE_MARK_KEY = "canvas.page_seen"  # what the page showed when it was last drawn whole (mark_page)


def read_event(ed: Editor) -> bool:
    """Apply what the browser sent under the current key (once). True when something was applied."""
    return ed.apply_canvas_value(st.session_state.get(ed.canvas_key))


def payload(ed: Editor) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes and edges as the component takes them, without the keys whose value is React Flow's default
    (hidden, selected, draggable, selectable, connectable, focusable: false/true as React Flow has them).
    Kept: ``deletable: False`` (React Flow deletes on Backspace by default, see above), the handles' sides
    (the component's own node types put them left and right without them) and a non-default node type."""
    nodes, edges = ed.canvas_payload()  # may bump the timestamp (new shapes to show): read it after
    flow_nodes = []
    for n in nodes:
        node = {"id": n["id"], "position": {"x": n["position"]["x"], "y": n["position"]["y"]},
                # not "label": the component would show data["label"], the raw label, instead of the escaped text;
                # SENT_KEY: the state this is, echoed back in the browser's values (Editor.apply_canvas_value)
                "data": {**{k: v for k, v in n["data"].items() if k != "label"}, SENT_KEY: ed.canvas_ts},
                "sourcePosition": "bottom", "targetPosition": "top", "deletable": False, "style": dict(n["style"])}
        if n.get("type", "default") != "default":
            node["type"] = n["type"]
        flow_nodes.append(node)
    flow_edges = [{"id": e["id"], "source": e["source"], "target": e["target"], "type": "smoothstep",
                   "markerEnd": {"type": "arrowclosed"}, "deletable": False} for e in edges]
    return flow_nodes, flow_edges


def _on_value(ed: Editor, rerun: str | None) -> None:
    """The component's callback: apply what it sent; when that changes more than the canvas shows (a connection:
    the side form's inputs and the validation line; a click: the side form), rerun the fragment ``rerun`` (the
    graph layer's, portal/graph_fragment.py) instead of the canvas' alone; a drag (positions only) reruns the
    canvas alone, as does a value that changes nothing."""
    before = _page_state(ed)[:-1]
    read_event(ed)
    if rerun is not None and _page_state(ed)[:-1] != before:
        st.rerun(rerun)


def draw(ed: Editor, rerun: str | None = None) -> None:
    """Render the canvas under the editor's current key (``rerun``: see :func:`_on_value`)."""
    try:
        component = flow_component.component()
    except FlowTrainError as err:  # the component cannot be served: say why, the rest of the page works
        st.error(str(err))
        return
    nodes, edges = payload(ed)  # may bump the timestamp (new shapes to show): read it after
    component(
        nodes=nodes, edges=edges, height=CANVAS_HEIGHT, showControls=True, fitView=ed.canvas_fit,
        showMiniMap=len(nodes) >= MINIMAP_FROM, style={}, animateNewEdges=False, allowNewEdges=True,
        layoutOptions=LAYOUT, getNodeOnClick=True, getEdgeOnClick=False, panOnDrag=True, allowZoom=True,
        minZoom=MIN_ZOOM, enableNodeMenu=False, enablePaneMenu=False, enableEdgeMenu=False, hideWatermark=True,
        key=ed.canvas_key, timestamp=ed.canvas_ts, component="streamlit_flow",
        on_change=functools.partial(_on_value, ed, rerun),  # (a component's callback takes no arguments)
    )


def _page_state(ed: Editor) -> tuple[Any, ...]:
    """What the page outside the canvas shows: the editor's part of it, and the values of the page's widgets
    (plain values under string keys: a button clicked is True in the run it causes, a choice its option)."""
    widgets = sorted((k, repr(v)) for k, v in st.session_state.items()
                     if isinstance(k, str) and isinstance(v, (bool, int, float, str, type(None)))
                     and not k.startswith(CANVAS_KEY_PREFIX) and k != PAGE_MARK_KEY)
    return ed.rev, ed.selected, tuple(n.id for n in ed.notices), ed.canvas_version, tuple(widgets)


def mark_page(ed: Editor) -> None:
    """Remember what the page shows, at the end of a run of the whole page (docs/streamlit-flow.md)."""
    st.session_state[PAGE_MARK_KEY] = _page_state(ed)


def _canvas_alone() -> bool:
    """Whether this run is the fragment's alone (not the fragment drawn inside a run of the whole page, nor inside a
    run of the graph layer's fragment alone: portal/graph_fragment.py)."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run
                and ThreadState.get().fragment_id in ctx.fragment_ids_this_run)


@st.fragment
def fragment(ed: Editor, rerun: str | None = None) -> None:
    """The canvas as a fragment: what the component sends reruns only this, not the page.

    A value that changes nothing outside the canvas (a drag: positions only) runs this function alone. One that
    changes the graph layer (a connection: the side form's inputs, the validation; a click: the side form) reruns
    the fragment ``rerun`` names instead (the graph layer's, :func:`_on_value`), which decides whether the page
    must run too. And the whole page runs after a click or a choice elsewhere on the page that reached Streamlit
    in the same batch as a canvas value: Streamlit then runs the fragment alone (with the button's callback
    before it), and the page showed neither the loaded template nor its notice (a CI failure of a browser test)."""
    read_event(ed)
    if _canvas_alone() and _page_changed(st.session_state.get(PAGE_MARK_KEY), _page_state(ed)):
        st.rerun()
    draw(ed, rerun)


def _page_changed(mark: Any, now: tuple[Any, ...]) -> bool:
    """Whether the page must be drawn again: the editor's part differs from the mark, or a widget's value does.
    A button is True only in the run its click caused: True in the mark and False now is that run's click, not
    a new one (the page's checkboxes edit the document, so unticking one shows in the editor's part). Widgets
    that came or went since the mark are the page's own doing (Streamlit forgets those a run did not draw)."""
    if not isinstance(mark, tuple) or mark[:-1] != now[:-1]:
        return True
    before = dict(mark[-1])
    return any(k in before and before[k] != v and (before[k], v) != ("True", "False") for k, v in now[-1])
