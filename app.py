"""FlowTrain portal: ``streamlit run app.py``. Signs the user in, then navigates over the thin pages."""

import os

import streamlit as st

from core.errors import FlowTrainError
from portal import auth, session

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
st.navigation(pages).run()
