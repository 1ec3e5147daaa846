"""Per-session objects: the settings, the signed-in user and the editor, kept in ``st.session_state``."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from core.config import CONFIG_ENV, HOME_ENV, Settings, load_settings
from core.editor_state import Editor

EDITOR_KEY = "portal.editor"
USER_KEY = "portal.user"
_ENVIRONMENTS_ENV = "FLOWTRAIN_ENVIRONMENTS"


@st.cache_resource(show_spinner=False)
def _settings_for(config: str | None, home: str | None, mtime: float | None) -> Settings:
    settings = load_settings()
    # The executors and the CLI read these variables: make every part of the portal agree.
    os.environ[HOME_ENV] = str(settings.home)
    if settings.environments_file is not None:
        os.environ[_ENVIRONMENTS_ENV] = str(settings.environments_file)
    return settings


def settings() -> Settings:
    """The portal's settings (re-read when the file named by FLOWTRAIN_CONFIG changes)."""
    config = os.environ.get(CONFIG_ENV) or None
    mtime = None
    if config:
        try:
            mtime = Path(config).stat().st_mtime
        except OSError:
            mtime = None
    return _settings_for(config, os.environ.get(HOME_ENV) if not config else None, mtime)


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
