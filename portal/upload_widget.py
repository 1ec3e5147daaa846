"""The editor's ONNX uploader: a Streamlit component (``st.components.v2``) that sends the file to the
portal's upload route in pieces (:mod:`portal.upload_route`), with a progress bar and Cancel, and tells the
page which complete upload to import. What the browser checks (type, size) the route checks again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from portal import upload_store

KEY = "toolbar.onnx.upload"
TICKET_KEY = "toolbar.onnx.ticket"  # (token, folder) of the ticket this page was given
IMPORTED_KEY = "toolbar.onnx.imported"  # the token of the last upload taken for import
EDITOR_SLUGS = ["editor"]  # the editor page's url path, stripped from the page's address to find the route
_JS = (Path(__file__).with_name("upload_widget.js")).read_text(encoding="utf-8")
_CSS = """
.ft-onnx-upload { display: flex; flex-direction: column; gap: 0.35rem; font-family: inherit; }
.ft-label { font-size: 0.875rem; color: var(--st-text-color, inherit); }
.ft-row { display: flex; gap: 0.75rem; align-items: center; }
.ft-file { font: inherit; font-size: 0.875rem; color: var(--st-text-color, inherit); }
.ft-file::file-selector-button, .ft-cancel {
  font: inherit; font-size: 0.875rem; padding: 0.3rem 0.75rem; margin-right: 0.75rem; cursor: pointer;
  color: var(--st-text-color, inherit); background: var(--st-background-color, transparent);
  border: 1px solid var(--st-border-color, rgba(49, 51, 63, 0.2)); border-radius: var(--st-base-radius, 0.5rem);
}
.ft-file::file-selector-button:hover, .ft-cancel:hover { border-color: var(--st-primary-color); }
.ft-progress { width: 100%; accent-color: var(--st-primary-color); }
.ft-status { font-size: 0.875rem; color: var(--st-text-color, inherit); opacity: 0.8; }
.ft-error { font-size: 0.875rem; color: var(--st-red-color, #d33); }
"""


@st.cache_resource(show_spinner=False)
def _component() -> Callable[..., object]:
    return st.components.v2.component("flowtrain_onnx_upload", js=_JS, css=_CSS, isolate_styles=False)


def ticket(user: str, root: Path, folder: Path, limit_bytes: int) -> upload_store.Ticket:
    """This page's ticket for ``folder``: the one it was given while it is open and unused, else a new one."""
    held = st.session_state.get(TICKET_KEY)
    if held and held[1] == str(folder):
        try:
            known = upload_store.find(held[0])
            if known.user == user and not known.complete and known.limit_bytes == limit_bytes:
                return known
        except upload_store.UploadError:
            pass  # expired or taken: a new one below
    new = upload_store.issue(user, root, folder, limit_bytes)
    st.session_state[TICKET_KEY] = (new.token, str(folder))
    return new


def uploaded_token() -> str | None:
    """In the component's callback: the token of the upload the browser has just finished."""
    event = (st.session_state.get(KEY) or {}).get("uploaded")
    token = event.get("token") if isinstance(event, dict) else None
    if isinstance(token, str):
        st.session_state[IMPORTED_KEY] = token
        return token
    return None


def uploader(label: str, held: upload_store.Ticket | None, on_uploaded: Callable[[], None]) -> None:
    """The uploader; without a ticket (no folder to write to) it is shown, and says why it cannot upload."""
    data = {"label": label, "token": held.token if held else "", "limit": held.limit_bytes if held else 0,
            "piece": upload_store.PIECE_BYTES, "slugs": EDITOR_SLUGS, "imported": st.session_state.get(IMPORTED_KEY)}
    _component()(key=KEY, data=data, on_uploaded_change=on_uploaded)
