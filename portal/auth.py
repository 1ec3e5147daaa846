"""Who is using this session: the trusted proxy's header, a local login, or the portal's OS user.

The rules live in :mod:`portal.users` (no Streamlit there); this module reads the request from
``st.context`` and keeps the sign-in in ``st.session_state``.
"""

from __future__ import annotations

import time

import streamlit as st

from portal import users
from portal.session import SIGNED_IN_KEY, USER_KEY
from portal.users import AccessError, LoginThrottle
from settings import Settings

SECRET_OK_KEY = "portal.session_secret_ok"
LOGIN_NOTES_KEY = "portal.login_notes"  # why a sign-in could not upgrade the stored hash


@st.cache_resource(show_spinner=False)
def login_throttle() -> LoginThrottle:
    """One throttle for every session of this portal process."""
    return LoginThrottle()


def request_headers() -> list[tuple[str, str]]:
    """Every header of the request, repeated ones included (``st.context.headers`` keeps them all)."""
    headers = st.context.headers
    return [(name, value) for name in headers for value in headers.get_all(name)]


def sign_in(settings: Settings) -> str:
    """Set ``st.session_state[USER_KEY]`` for this run, or show why not / a login form and stop."""
    if settings.auth.mode == "session":
        # One user's own portal (the Open OnDemand app): the browser session shows the secret once,
        # in the Connect button's ?secret=…; the portal's OS user is the user.
        if not st.session_state.get(SECRET_OK_KEY):
            try:
                users.check_session_secret(st.query_params.get("secret", ""), settings)
            except AccessError as err:
                st.error(str(err))
                st.stop()
            st.session_state[SECRET_OK_KEY] = True
        name = users.default_local_user()
        st.session_state[USER_KEY] = name
        return name
    if settings.auth.mode == "header":
        try:
            name = users.user_from_request(request_headers(), st.context.ip_address, settings)
        except AccessError as err:
            st.session_state.pop(USER_KEY, None)
            st.error(str(err))
            st.stop()
        st.session_state[USER_KEY] = name
        return name
    if not users.login_required(settings):
        name = st.session_state.get(USER_KEY) or users.default_local_user()
        st.session_state[USER_KEY] = name
        return name
    name = st.session_state.get(USER_KEY)
    if name and not users.session_expired(st.session_state.get(SIGNED_IN_KEY), settings):
        for note in st.session_state.pop(LOGIN_NOTES_KEY, []):
            st.warning(note)
        return name
    if name:
        st.session_state.pop(USER_KEY, None)
        st.info(f"Your session ended after {settings.auth.session_hours:g} hour(s); sign in again.")
    _login_form(settings)
    raise AssertionError("unreachable")  # _login_form ends with st.stop()


def _login_form(settings: Settings) -> None:
    st.title("FlowTrain")
    with st.form("login"):
        st.subheader("Sign in")
        login = st.text_input("User name", key="login.name")
        password = st.text_input("Password", type="password", key="login.password")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        notes: list[str] = []
        try:
            st.session_state[USER_KEY] = users.check_login(login, password, settings, throttle=login_throttle(),
                                                           address=st.context.ip_address, notes=notes)
        except AccessError as err:
            st.error(str(err))
            st.stop()
        st.session_state[SIGNED_IN_KEY] = time.time()
        st.session_state[LOGIN_NOTES_KEY] = notes  # shown once, after the rerun below
        st.rerun()
    st.stop()


def sign_out_button(settings: Settings) -> None:
    if users.login_required(settings) and st.sidebar.button("Sign out", key="logout"):
        st.session_state.pop(USER_KEY, None)
        st.session_state.pop(SIGNED_IN_KEY, None)
        st.rerun()
