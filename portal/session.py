"""Per-session objects: the settings, the signed-in user and the editor, kept in ``st.session_state``."""

from __future__ import annotations

import streamlit as st

from portal.editor_state import Editor
from settings import Settings, load_settings

EDITOR_KEY = "portal.editor"
USER_KEY = "portal.user"
SIGNED_IN_KEY = "portal.signed_in_at"  # time.time() of a local sign-in (sessions expire)


def settings() -> Settings:
    """The portal's settings, read afresh on every rerun (two small files): a change to the settings
    or environments file, or to a ``FLOWTRAIN_*`` variable, counts at the next interaction, and the
    portal, the executors and the command line resolve them the same way (:mod:`settings`)."""
    return load_settings()


def editor() -> Editor:
    if EDITOR_KEY not in st.session_state:
        st.session_state[EDITOR_KEY] = Editor()
    return st.session_state[EDITOR_KEY]


def user() -> str:
    """The signed-in user, set by app.py before any page runs."""
    name = st.session_state.get(USER_KEY)
    if not name:
        st.error("No user is signed in.")
        st.stop()
    return name


def reset_widgets(*prefixes: str) -> None:
    """Forget widget values under these key prefixes, so the widgets show the document's values again."""
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith(prefixes):
            del st.session_state[key]
