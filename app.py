"""FlowTrain portal: ``streamlit run app.py``. Signs the user in, then navigates over the thin pages."""

import os

import streamlit as st

from core.errors import FlowTrainError
from portal import auth, drafts_view, session

# Run directories, the registry and every file the portal writes are its users' private state.
os.umask(0o077)
st.set_page_config(page_title="FlowTrain", page_icon=":material/model_training:", layout="wide")

try:
    settings = session.settings()
except FlowTrainError as err:  # a wrong settings file: say what and where, no traceback
    st.error(str(err))
    st.stop()
user = auth.sign_in(settings)
st.sidebar.caption(f"Signed in as **{user}** · scheduler: {settings.scheduler}")
auth.sign_out_button(settings)

pages = [
    st.Page("pages/editor.py", title="Editor", icon=":material/account_tree:", default=True),
    st.Page("pages/code.py", title="Code", icon=":material/code:"),
    st.Page("pages/cluster.py", title="Cluster", icon=":material/dns:"),
    st.Page("pages/runs.py", title="Runs", icon=":material/monitoring:"),
]
drafts_view.open_session(settings, user)  # a new session goes on with the user's last draft
st.navigation(pages).run()
drafts_view.autosave(session.editor(), settings, user)  # what this run changed (the editor page saves callbacks' edits)
