"""Editor page: data layer, graph layer, training layer (drawing in portal/editor_view.py)."""

from portal import editor_view, session

editor_view.page(session.editor(), session.settings(), session.user())
