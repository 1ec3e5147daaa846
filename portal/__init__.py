"""The Streamlit portal: the pages' views (they import streamlit) and the portal's own state and
rules, which do not (``editor_state``: the drawing being edited; ``users``: who signs in and which
data they may read; ``dataprobe``: what a data source holds). The framework-free heart is ``core/``."""
