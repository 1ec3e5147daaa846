"""Runs page: submit, list, follow live, cancel, resubmit, compare (drawing in portal/runs_view.py)."""

from portal import runs_view, session

runs_view.page(session.editor(), session.settings(), session.user())
