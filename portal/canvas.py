"""The streamlit-flow canvas, rendered so that Python-side edits are never lost (the stale-state race)
and a real network stays readable.

See ``docs/streamlit-flow.md``: a Python-side change is sent to the same component with a timestamp
newer than its last update (the user's zoom and pan stay); a new graph (template, import, undo,
auto-layout) or a node added from the palette remounts it under a new key with its view fitted
(the component cannot be told to pan to a new node). A value read back under the current
key is applied once. :func:`read_event` runs at the top of the page (before anything is drawn from
the document) and :func:`draw` where the canvas belongs.

Readable: nodes have a fixed width and a 14 px font (``portal.graph_layout.NODE_STYLE``), and the
smallest zoom keeps that font at 10.5 px on screen, so fitting a big graph stops there (the view
then shows its middle; the minimap, shown from ``MINIMAP_FROM`` nodes, finds the rest). Only the side
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

import streamlit as st
from streamlit_flow import StreamlitFlowEdge, StreamlitFlowNode, StreamlitFlowState, streamlit_flow
from streamlit_flow.layouts import LayeredLayout, ManualLayout

from portal.editor_state import Editor
from portal.graph_layout import NODE_FONT_PX, NODE_WIDTH_PX, NODE_X_STEP

CANVAS_HEIGHT = 800
READABLE_PX = 10.5  # the smallest text size on screen the canvas allows
MIN_ZOOM = READABLE_PX / NODE_FONT_PX
MINIMAP_FROM = 12  # nodes; fewer fit the canvas at a readable zoom


def read_event(ed: Editor) -> bool:
    """Apply what the browser sent under the current key (once). True when something was applied."""
    return ed.apply_canvas_value(st.session_state.get(ed.canvas_key))


def _flow_state(ed: Editor) -> StreamlitFlowState:
    nodes, edges = ed.canvas_payload()
    flow_nodes = [
        StreamlitFlowNode(
            id=n["id"], pos=(n["position"]["x"], n["position"]["y"]),
            # not "label": the component replaces the node's (escaped) text with data["label"], raw
            data={k: v for k, v in n["data"].items() if k != "label"},
            # a block's input port is its interface: kept on the canvas (portal/editor_blocks.py)
            # not deletable: the component's keyboard delete would remove it in the browser only (see above)
            node_type=n.get("type", "default"), selectable=True, connectable=True, deletable=False,
            style=dict(n["style"]),
        )
        for n in nodes
    ]
    flow_edges = [
        StreamlitFlowEdge(id=e["id"], source=e["source"], target=e["target"], edge_type="smoothstep",
                          deletable=False, focusable=True, marker_end={"type": "arrowclosed"})
        for e in edges
    ]
    return StreamlitFlowState(nodes=flow_nodes, edges=flow_edges, selected_id=ed.selected, timestamp=ed.canvas_ts)


def draw(ed: Editor) -> None:
    """Render the canvas under the editor's current key."""
    state = _flow_state(ed)  # may bump the version (new shapes to show): read the key after it
    # the browser's layered layout, top to bottom, spaced like Python's own (editor_state.layered_positions)
    layout = LayeredLayout(direction="down", node_node_spacing=NODE_X_STEP - NODE_WIDTH_PX,
                           node_layer_spacing=40) if ed.auto_layout else ManualLayout()
    streamlit_flow(
        ed.canvas_key, state, height=CANVAS_HEIGHT, fit_view=ed.canvas_fit, show_controls=True,
        show_minimap=len(state.nodes) >= MINIMAP_FROM, allow_new_edges=True, layout=layout, get_node_on_click=True,
        get_edge_on_click=False, min_zoom=MIN_ZOOM, enable_pane_menu=False, enable_node_menu=False,
        enable_edge_menu=False, hide_watermark=True,
    )
