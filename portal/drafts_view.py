"""The editor's drafts on the page: the draft this session edits, saved after every change, and the
bar that opens, renames, duplicates and deletes drafts (storage in :mod:`portal.drafts`).

A session is bound to one draft (:class:`DraftBinding`, in ``st.session_state``): the first run of a
session opens the user's last open draft, so a reload, a new tab or a restarted portal shows the work
as it was. :func:`autosave` writes the document (and its undo/redo history) whenever it changed
since the last save; a save refused because another tab saved first leaves a message with two ways
on: reload the saved draft, or save this tab's document as a new draft.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from portal import session
from portal.drafts import DraftConflict, DraftError, DraftInfo, DraftState, DraftStore
from portal.editor_state import Editor
from portal.session import reset_widgets
from settings import Settings

BINDING_KEY = session.DRAFT_KEY
TOPIC = "draft"


@dataclass
class DraftBinding:
    """The draft this session edits."""

    id: str
    name: str
    user: str  # whose draft
    revision: int  # the saved revision this session's document is based on
    saved_rev: int  # Editor.rev when it was last saved or opened
    trouble: str = ""  # why the last save did not happen; saving waits until the user chooses
    conflict: bool = False  # the trouble is another tab's newer save
    confirm_delete: bool = False
    widgets: int = 0  # part of the bar's widget keys: new widgets after the draft changes


def store_for(settings: Settings, user: str) -> DraftStore:
    return DraftStore(settings.home, user)


def binding() -> DraftBinding | None:
    return st.session_state.get(BINDING_KEY)


def state_of(ed: Editor) -> DraftState:
    return DraftState(ed.doc, ed.history, ed.future)


def _bind(ed: Editor, store: DraftStore, info: DraftInfo) -> DraftBinding:
    old = binding()
    b = DraftBinding(info.id, info.name, store.user, info.revision, ed.rev, widgets=(old.widgets + 1) if old else 0)
    st.session_state[BINDING_KEY] = b
    store.set_last_open(info.id)
    return b


def _open(ed: Editor, store: DraftStore, draft_id: str) -> DraftInfo:
    info, saved = store.load(draft_id)
    ed.open_document(saved.doc, saved.history, saved.future)
    _bind(ed, store, info)
    reset_widgets("editor.", "toolbar.template")
    return info


def open_session(settings: Settings, user: str) -> None:
    """On a session's first run (or the first after another user signed in: :func:`portal.session.editor`):
    open the user's last draft, or keep this blank document as a new one."""
    ed = session.editor()
    if binding() is not None:
        return
    store = store_for(settings, user)
    last = store.last_open()
    if last is not None:
        try:
            info = _open(ed, store, last)
        except DraftError as err:
            ed.notice("error", f"{err} A new draft was started instead.", "toolbar", topic=TOPIC)
        else:
            ed.notice("info", f"Opened your draft {info.name!r} as you left it (saved {_when(info.saved_at)}).",
                      "toolbar", topic=TOPIC)
            return
    _bind(ed, store, store.create(ed.doc.get("name") or "pipeline", state_of(ed)))


def autosave(ed: Editor, settings: Settings, user: str) -> None:
    """Save the document when it changed since the last save (not while a refused save waits for the user)."""
    b = binding()
    if b is None or b.user != user or b.trouble or ed.rev == b.saved_rev:
        return
    try:
        info = store_for(settings, user).save(b.id, state_of(ed), b.revision)
    except DraftConflict as err:
        b.trouble, b.conflict = str(err), True
        return
    except (DraftError, OSError) as err:
        b.trouble = f"Your latest changes are not saved: {err}. Save them as a new draft."
        return
    b.revision, b.saved_rev, b.name = info.revision, ed.rev, info.name


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


# --------------------------------------------------------------------------- actions (button callbacks)


def _guarded(ed: Editor, action: str, run: Callable[[], None]) -> None:
    try:
        run()
    except (DraftError, OSError) as err:
        ed.notice("error", f"Could not {action}: {err}", "toolbar", topic=TOPIC)


def new_draft(ed: Editor, settings: Settings, user: str) -> None:
    """Start a new, blank draft; the current one stays in the list."""
    def run() -> None:
        store = store_for(settings, user)
        ed.open_document(Editor.blank_doc(), [], [])
        info = store.create("pipeline", state_of(ed))
        _bind(ed, store, info)
        reset_widgets("editor.", "toolbar.template")
        ed.notice("success", "Started a new draft; your other drafts are in the list.", "toolbar", topic=TOPIC)
    _guarded(ed, "start a new draft", run)


def open_draft(ed: Editor, settings: Settings, user: str, key: str) -> None:
    draft_id = st.session_state.get(key)
    b = binding()
    store = store_for(settings, user)
    if not draft_id or b is None or draft_id == b.id or draft_id not in {d.id for d in store.list()}:
        return  # nothing new chosen, or a value left from an older list
    if b.trouble:
        b.widgets += 1  # the picker shows the open draft again
        ed.notice("warning", "First keep this tab's changes: save them as a copy, or reload the saved draft.",
                  "toolbar", topic=TOPIC)
        return

    def run() -> None:
        autosave(ed, settings, user)
        info = _open(ed, store_for(settings, user), draft_id)
        ed.notice("info", f"Opened the draft {info.name!r}.", "toolbar", topic=TOPIC)
    _guarded(ed, "open the draft", run)


def rename_draft(ed: Editor, settings: Settings, user: str, key: str) -> None:
    b = binding()
    if b is None:
        return

    def run() -> None:
        info = store_for(settings, user).rename(b.id, st.session_state.get(key) or "")
        b.name = info.name
        ed.clear_topic(TOPIC)
    _guarded(ed, "rename the draft", run)
    b.widgets += 1  # the field shows the name kept (the new one, or the old one when refused)


def save_copy(ed: Editor, settings: Settings, user: str) -> None:
    """This session's document (saved or not) as a new draft, which this session then edits."""
    b = binding()

    def run() -> None:
        store = store_for(settings, user)
        info = store.create(f"{b.name if b else 'pipeline'} (copy)", state_of(ed), named=True)
        _bind(ed, store, info)
        ed.notice("success", f"Saved as the new draft {info.name!r}, which you are now editing.", "toolbar",
                  topic=TOPIC)
    _guarded(ed, "save a copy", run)


def reload_saved(ed: Editor, settings: Settings, user: str) -> None:
    """Drop this session's unsaved changes and show the draft as last saved (from another tab)."""
    b = binding()
    if b is None:
        return

    def run() -> None:
        info = _open(ed, store_for(settings, user), b.id)
        ed.notice("info", f"Reloaded the draft {info.name!r} as saved (revision {info.revision}).", "toolbar",
                  topic=TOPIC)
    _guarded(ed, "reload the draft", run)


def delete_draft(ed: Editor, settings: Settings, user: str) -> None:
    """Delete the open draft, then open the most recent other one (or a new blank one)."""
    b = binding()
    if b is None:
        return

    def run() -> None:
        store = store_for(settings, user)
        store.delete(b.id)
        others = [d for d in store.list() if not d.problem]
        if others:
            _open(ed, store, others[0].id)
        else:
            ed.open_document(Editor.blank_doc(), [], [])
            _bind(ed, store, store.create("pipeline", state_of(ed)))
            reset_widgets("editor.", "toolbar.template")
        ed.notice("info", f"Deleted the draft {b.name!r}.", "toolbar", topic=TOPIC)
    _guarded(ed, "delete the draft", run)


def picker_labels(drafts: list[DraftInfo], b: DraftBinding) -> dict[str, str]:
    """Draft id → the picker's label: its name, told apart by when it was saved when names repeat."""
    names = {d.id: d.name + (" (unreadable)" if d.problem else "") for d in drafts}
    names.setdefault(b.id, b.name)
    when = {d.id: d.saved_at for d in drafts}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    labels = {i: f"{n} · saved {_when(when.get(i, 0.0))}" if counts[n] > 1 else n for i, n in names.items()}
    seen = list(labels.values())
    return {i: f"{label} · {i[:6]}" if seen.count(label) > 1 else label  # saved in the same minute too
            for i, label in labels.items()}


def _ask_delete(flag: bool) -> None:
    b = binding()
    if b is not None:
        b.confirm_delete = flag


# --------------------------------------------------------------------------- the bar


def drafts_bar(ed: Editor, settings: Settings, user: str) -> DeltaGenerator | None:
    """Which draft is open and the draft actions; the place for whether it is saved (:func:`save_status`, drawn
    by the graph layer's fragment, which saves its own edits: portal/graph_fragment.py), None without a draft."""
    b = binding()
    if b is None:
        return None
    if b.trouble:
        st.error(b.trouble, icon=":material/sync_problem:")
        x, y, _ = st.columns([2, 2, 4])
        if b.conflict:
            x.button("Reload the saved draft", key="drafts.reload", on_click=reload_saved, args=(ed, settings, user),
                     help="Shows the draft as the other tab saved it; this tab's unsaved changes are dropped.")
        y.button("Save mine as a copy", key="drafts.copy", on_click=save_copy, args=(ed, settings, user),
                 type="primary", help="Keeps this tab's document as a new draft; the other one stays as saved.")
    drafts = store_for(settings, user).list()
    names = picker_labels(drafts, b)
    ids = sorted(names, key=lambda i: (names[i].lower(), i))
    c1, c2, c3, c4, c5 = st.columns([3, 3, 1.2, 1.2, 1.2], vertical_alignment="bottom")
    # Streamlit keeps a selectbox's value as the option's label: a label that changed under the same key
    # (a draft renamed, or named after its pipeline) came back as text. New labels, new widget.
    digest = hashlib.sha1(json.dumps([[i, names[i]] for i in ids]).encode()).hexdigest()[:10]
    pick = f"drafts.pick.{b.id}.{digest}.{b.widgets}"
    c1.selectbox("Draft", ids, index=ids.index(b.id), key=pick, format_func=lambda i: names[i],
                 on_change=open_draft, args=(ed, settings, user, pick),
                 help="Your drafts, saved on the server after every change: open one to go on with it.")
    rename = f"drafts.name.{b.id}.{b.widgets}"
    c2.text_input("Draft name", value=b.name, key=rename, on_change=rename_draft, args=(ed, settings, user, rename))
    c3.button("New draft", key="drafts.new", on_click=new_draft, args=(ed, settings, user),
              help="Start a blank pipeline as a new draft; this one stays in the list.")
    c4.button("Duplicate", key="drafts.duplicate", on_click=save_copy, args=(ed, settings, user),
              help="A copy of this draft (with its undo history), which you then edit.")
    c5.button("Delete", key="drafts.delete", on_click=_ask_delete, args=(True,))
    if b.confirm_delete:
        st.warning(f"Delete the draft **{b.name}** for good? Its undo history goes with it.")
        x, y, _ = st.columns([2, 2, 4])
        x.button("Yes, delete it", key="drafts.delete_yes", on_click=delete_draft, args=(ed, settings, user),
                 type="primary")
        y.button("Keep it", key="drafts.delete_no", on_click=_ask_delete, args=(False,))
    problems = [d for d in drafts if d.problem]
    for d in problems:
        st.caption(f"⚠ {d.problem}")
    return st.container()


def save_status() -> None:
    """The line saying the draft is saved, and at which revision (nothing while a save waits for the user)."""
    b = binding()
    if b is not None and not b.trouble:
        st.caption(f"Saved on the server · revision {b.revision}")
