"""How the portal is served: ``streamlit run serve.py`` (scripts/portal.sh, the Open OnDemand app, the tests).

The pages are ``app.py``'s, as with ``streamlit run app.py``; beside Streamlit's routes this adds the
portal's own upload route (:mod:`portal.upload_route`), which writes a large upload (an ONNX model with its
weights) to disk in pieces instead of holding it in memory as Streamlit's uploader does.
"""

import os

import streamlit as st

from portal.upload_route import ROUTES

os.umask(0o077)  # the upload route writes users' files too (app.py sets the same for the pages)
app = st.App("app.py", routes=ROUTES)
