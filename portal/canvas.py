"""The streamlit-flow canvas, rendered so that Python-side edits are never lost (the stale-state race).

See ``docs/streamlit-flow.md``: every Python-side change is sent under a new key
(``canvas-{version}``, which remounts the iframe) with a fresh timestamp, and a value read back
under the current key is applied once. :func:`read_event` runs at the top of the page (before
anything is drawn from the document) and :func:`draw` where the canvas belongs.
"""

from __future__ import annotations

import streamlit as st
from streamlit_flow import StreamlitFlowEdge, StreamlitFlowNode, StreamlitFlowState, streamlit_flow
from streamlit_flow.layouts import LayeredLayout, ManualLayout

from portal.editor_state import Editor

CANVAS_HEIGHT = 620


def read_event(ed: Editor) -> bool:
    """Apply what the browser sent under the current key (once). True when something was applied."""
    return ed.apply_canvas_value(st.session_state.get(ed.canvas_key))


def _flow_state(ed: Editor) -> StreamlitFlowState:
    nodes, edges = ed.canvas_payload()
    flow_nodes = [
        StreamlitFlowNode(
            id=n["id"], pos=(n["position"]["x"], n["position"]["y"]), data=dict(n["data"]),
            node_type=n.get("type", "default"), selectable=True, connectable=True, deletable=True,
            style=dict(n["style"]),
        )
        for n in nodes
    ]
    flow_edges = [
        StreamlitFlowEdge(id=e["id"], source=e["source"], target=e["target"], edge_type="smoothstep",
                          deletable=True, focusable=True, marker_end={"type": "arrowclosed"})
        for e in edges
    ]
    return StreamlitFlowState(nodes=flow_nodes, edges=flow_edges, selected_id=ed.selected, timestamp=ed.canvas_ts)


def draw(ed: Editor) -> None:
    """Render the canvas under the editor's current key."""
    state = _flow_state(ed)  # may bump the version (new shapes to show): read the key after it
    layout = LayeredLayout(direction="down", node_node_spacing=40, node_layer_spacing=50) if ed.auto_layout \
        else ManualLayout()
    streamlit_flow(
        ed.canvas_key, state, height=CANVAS_HEIGHT, fit_view=True, show_controls=True, show_minimap=False,
        allow_new_edges=True, layout=layout, get_node_on_click=True, get_edge_on_click=False,
        min_zoom=0.1, enable_pane_menu=False, enable_node_menu=True, enable_edge_menu=True, hide_watermark=True,
    )
