"""Cluster page: utilisation charts, frameworks per environment, the selector's choice (portal/cluster_view.py)."""

from portal import cluster_view, session

cluster_view.page(session.editor(), session.settings(), session.user())
