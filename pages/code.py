"""Code page: generated programs side by side, support table, zip, equivalence (portal/code_view.py)."""

from portal import code_view, session

code_view.page(session.editor(), session.user())
