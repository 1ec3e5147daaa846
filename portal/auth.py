"""Who is using this session: the trusted proxy header, a local login, or the portal's OS user."""

from __future__ import annotations

import streamlit as st

from portal import users
from portal.session import USER_KEY
from portal.users import AccessError
from settings import Settings

SECRET_OK_KEY = "portal.session_secret_ok"


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
            name = users.user_from_headers(dict(st.context.headers), settings)
        except AccessError as err:
            st.error(str(err))
            st.stop()
        st.session_state[USER_KEY] = name
        return name
    if not users.login_required(settings):
        name = st.session_state.get(USER_KEY) or users.default_local_user()
        st.session_state[USER_KEY] = name
        return name
    name = st.session_state.get(USER_KEY)
    if name:
        return name
    st.title("FlowTrain")
    with st.form("login"):
        st.subheader("Sign in")
        login = st.text_input("User name", key="login.name")
        password = st.text_input("Password", type="password", key="login.password")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        try:
            st.session_state[USER_KEY] = users.check_login(login, password, settings)
        except AccessError as err:
            st.error(str(err))
            st.stop()
        st.rerun()
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises


def sign_out_button(settings: Settings) -> None:
    if users.login_required(settings) and st.sidebar.button("Sign out", key="logout"):
        st.session_state.pop(USER_KEY, None)
        st.rerun()
