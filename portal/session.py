"""Per-session objects: the settings, the signed-in user and the editor, kept in ``st.session_state``."""

from __future__ import annotations

import streamlit as st

from portal.editor_state import Editor
from settings import Settings, load_settings

EDITOR_KEY = "portal.editor"
EDITOR_OWNER_KEY = "portal.editor_owner"  # the user the editor belongs to
DRAFT_KEY = "portal.draft"  # the draft the editor is saved to (portal/drafts_view.py)
USER_KEY = "portal.user"
SIGNED_IN_KEY = "portal.signed_in_at"  # time.time() of a local sign-in (sessions expire)


def settings() -> Settings:
    """The portal's settings, read afresh on every rerun (two small files): a change to the settings
    or environments file, or to a ``FLOWTRAIN_*`` variable, counts at the next interaction, and the
    portal, the executors and the command line resolve them the same way (:mod:`settings`)."""
    return load_settings()


def editor() -> Editor:
    """This session's editor. Another user signed in in the same browser session (local logins) gets a
    new one: nothing of the last user's document, history, notices or draft stays."""
    user = st.session_state.get(USER_KEY)
    if EDITOR_KEY not in st.session_state or st.session_state.get(EDITOR_OWNER_KEY) != user:
        st.session_state[EDITOR_KEY] = Editor()
        st.session_state[EDITOR_OWNER_KEY] = user
        st.session_state.pop(DRAFT_KEY, None)
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
