"""The editor's notices drawn in their area (toolbar, data, graph, training), each with a dismiss button.

The notices themselves are the editor's (:meth:`portal.editor_state.Editor.notice`); every layer's view
draws its own area's here.
"""

from __future__ import annotations

import streamlit as st

from portal.editor_state import Editor


def notices(ed: Editor, area: str) -> None:
    """The area's notices, each with a button that dismisses it; they stay until then (or until a
    newer one on the same topic, or the edit they ask for, replaces them)."""
    for n in ed.notices_in(area):
        text, close = st.columns([24, 1], vertical_alignment="center")
        show = {"error": text.error, "warning": text.warning, "info": text.info, "success": text.success}[n.level]
        show(n.text)
        close.button("✕", key=f"notice.{n.id}", on_click=ed.dismiss, args=(n.id,), help="Dismiss this message")
