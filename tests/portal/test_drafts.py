"""Drafts: the editor's work kept on the server (portal/drafts.py) and restored in every new session
(portal/drafts_view.py), two tabs never writing over each other, export at any time."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from core import zoo
from portal.drafts import DraftConflict, DraftError, DraftState, DraftStore
from tests.portal.conftest import as_the_browser, assert_no_exception, downloaded, editor, form, messages


def _state(name: str = "p") -> DraftState:
    return DraftState({"name": name, "nodes": [], "edges": []}, ["{}"], [])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --------------------------------------------------------------------------- the store


def test_a_draft_is_private_written_whole_and_read_back(tmp_path: Path):
    store = DraftStore(tmp_path, "alice")
    info = store.create("My net", _state())
    assert (info.name, info.revision) == ("My net", 1)
    path = store.dir / f"{info.id}.json"
    assert _mode(store.dir) == 0o700 and _mode(path) == 0o600
    saved = store.save(info.id, DraftState({"name": "changed"}, ["a", "b"], ["c"]), base_revision=1)
    assert saved.revision == 2
    again, state = DraftStore(tmp_path, "alice").load(info.id)
    assert (again.revision, state.doc, state.history, state.future) == (2, {"name": "changed"}, ["a", "b"], ["c"])
    assert _mode(path) == 0o600
    assert [p.name for p in store.dir.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left


def test_a_save_from_a_stale_revision_is_refused_and_changes_nothing(tmp_path: Path):
    store = DraftStore(tmp_path, "alice")
    info = store.create("shared", _state())
    store.save(info.id, DraftState({"name": "tab A"}, [], []), base_revision=1)
    with pytest.raises(DraftConflict) as err:
        store.save(info.id, DraftState({"name": "tab B"}, [], []), base_revision=1)
    assert (err.value.theirs, err.value.mine) == (2, 1)
    assert "another tab" in str(err.value) and "copy" in str(err.value)
    assert store.load(info.id)[1].doc == {"name": "tab A"}


def test_rename_duplicate_delete_and_the_last_open_draft(tmp_path: Path):
    store = DraftStore(tmp_path, "alice")
    a = store.create("a", _state("a"))
    assert store.rename(a.id, "  better   name ").name == "better name"
    with pytest.raises(DraftError, match="needs a name"):
        store.rename(a.id, "   ")
    copy = store.duplicate(a.id)
    assert copy.name == "better name (copy)" and store.load(copy.id)[1].doc == {"name": "a", "nodes": [], "edges": []}
    assert {d.id for d in store.list()} == {a.id, copy.id}
    store.set_last_open(copy.id)
    assert store.last_open() == copy.id
    store.delete(copy.id)
    assert store.last_open() is None and [d.id for d in store.list()] == [a.id]
    with pytest.raises(DraftError, match="already deleted"):
        store.delete(copy.id)
    assert DraftStore(tmp_path, "bob").list() == []  # another user's drafts are his own


def test_an_unreadable_draft_is_listed_with_its_problem_and_left_alone(tmp_path: Path):
    store = DraftStore(tmp_path, "alice")
    store.create("good", _state())
    (store.dir / "broken.json").write_text("{not json", encoding="utf-8")
    listed = {d.id: d for d in store.list()}
    assert "cannot be read" in listed["broken"].problem
    with pytest.raises(DraftError, match="cannot be read"):
        store.load("broken")
    assert (store.dir / "broken.json").read_text(encoding="utf-8") == "{not json"


# --------------------------------------------------------------------------- the page


def _load_template(at, name: str) -> None:
    as_the_browser(at, lambda: at.selectbox(key="toolbar.template").set_value(name))
    as_the_browser(at, at.button(key="toolbar.load").click)


def test_a_reload_shows_the_pipeline_and_its_undo_history(app):
    at = app()
    _load_template(at, "lenet5")
    as_the_browser(at, lambda: form(at, "number_input", "training.epochs").set_value(3))
    assert editor(at).doc["training"]["epochs"] == 3
    again = app()  # a reload, a new tab or a restarted portal: a new session
    ed = editor(again)
    assert ed.doc["name"] == "lenet5" and ed.doc["training"]["epochs"] == 3
    assert any("as you left it" in m for m in messages(again))
    assert not again.button(key="toolbar.undo").proto.disabled
    as_the_browser(again, again.button(key="toolbar.undo").click)
    assert editor(again).doc["training"]["epochs"] == 12
    as_the_browser(again, again.button(key="toolbar.redo").click)  # redo, beside undo
    assert editor(again).doc["training"]["epochs"] == 3
    assert again.button(key="toolbar.redo").proto.disabled


def test_a_second_tab_is_told_and_chooses_to_keep_its_work_as_a_copy(app, portal_env):
    first, second = app(), app()
    as_the_browser(first, lambda: form(first, "number_input", "training.epochs").set_value(4))
    as_the_browser(second, lambda: form(second, "number_input", "training.epochs").set_value(7))
    assert any("saved from another tab" in m for m in messages(second))
    store = DraftStore(portal_env / "home", _user(first))
    [only] = store.list()
    assert store.load(only.id)[1].doc["training"]["epochs"] == 4  # the first tab's save stands
    as_the_browser(second, second.button(key="drafts.copy").click)
    assert not any("saved from another tab" in m for m in messages(second))
    drafts = store.list()
    assert len(drafts) == 2
    copy = next(d for d in drafts if d.id != only.id)
    assert store.load(copy.id)[1].doc["training"]["epochs"] == 7 and copy.name.endswith("(copy)")


def test_a_second_tab_can_reload_the_saved_draft(app):
    first, second = app(), app()
    as_the_browser(first, lambda: form(first, "number_input", "training.epochs").set_value(4))
    as_the_browser(second, lambda: form(second, "number_input", "training.epochs").set_value(7))
    as_the_browser(second, second.button(key="drafts.reload").click)
    assert editor(second).doc["training"]["epochs"] == 4
    assert form(second, "number_input", "training.epochs").value == 4
    as_the_browser(second, lambda: form(second, "number_input", "training.epochs").set_value(5))
    assert not any("saved from another tab" in m for m in messages(second))  # saving again from the new base


def test_new_open_and_delete_drafts_from_the_bar(app, portal_env):
    at = app()
    _load_template(at, "lenet5")
    as_the_browser(at, at.button(key="drafts.new").click)
    assert [n["id"] for n in editor(at).nodes] == ["input", "output"]
    assert at.selectbox(key="toolbar.template").value is None  # the picker no longer shows lenet5
    [pick] = [s for s in at.selectbox if str(s.key).startswith("drafts.pick.")]
    assert sorted(pick.options) == ["lenet5", "pipeline"]  # each draft named after its pipeline until renamed
    lenet = next(d.id for d in DraftStore(portal_env / "home", _user(at)).list() if d.name == "lenet5")
    as_the_browser(at, lambda: pick.set_value(lenet))
    assert editor(at).doc["name"] == "lenet5"
    as_the_browser(at, at.button(key="drafts.delete").click)
    as_the_browser(at, at.button(key="drafts.delete_yes").click)
    assert editor(at).doc["name"] == "pipeline"
    [pick] = [s for s in at.selectbox if str(s.key).startswith("drafts.pick.")]
    assert pick.options == ["pipeline"]


def test_export_works_with_an_invalid_data_layer_and_lists_its_problems(app, downloads):
    at = app()
    _load_template(at, "lenet5")
    editor(at).set_field("data", ("validation_split",), 3.5)  # a value no form would take, e.g. from an old draft
    at.run()
    assert_no_exception(at)
    exported = json.loads(downloaded(at, downloads, "Export spec (JSON)"))
    assert any(p.startswith("data.validation_split") for p in exported["problems"])
    assert exported["data"]["validation_split"] == 3.5 and len(exported["model"]["nodes"]) == len(
        zoo.template("lenet5").model.nodes)
    # fixed in the file, it imports again (the problem list is dropped)
    exported["data"]["validation_split"] = 0.1
    at.file_uploader(key=editor(at).upload_key).set_value(
        ("fixed.json", json.dumps(exported).encode(), "application/json"))
    at.run()
    assert_no_exception(at)
    assert editor(at).doc["data"]["validation_split"] == 0.1
    assert any("exported with" in m for m in messages(at))


def _user(at) -> str:
    return at.session_state["portal.user"]


def test_the_picker_tells_drafts_of_one_name_apart(tmp_path: Path):
    from portal.drafts_view import DraftBinding, picker_labels

    store = DraftStore(tmp_path, "alice")
    a, b = store.create("pipeline", _state()), store.create("pipeline", _state())
    c = store.create("mine", _state())
    labels = picker_labels(store.list(), DraftBinding(a.id, a.name, "alice", 1, 0))
    assert labels[c.id] == "mine" and len(set(labels.values())) == 3
    assert all(labels[i].startswith("pipeline · ") for i in (a.id, b.id))


def test_another_user_signing_in_in_the_same_session_sees_nothing_of_the_last_ones(portal_env):
    import time as _time

    from streamlit.testing.v1 import AppTest

    from portal.users import hash_password
    from tests.portal.conftest import APP, TIMEOUT_S

    config = portal_env / "flowtrain.toml"
    hashed = hash_password("pw", iterations=1000)
    config.write_text(config.read_text(encoding="utf-8") + '[auth]\nmode = "local"\n'
                      f'[auth.local_users]\nalice = "{hashed}"\nbob = "{hashed}"\n', encoding="utf-8")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.session_state["portal.user"] = "alice"
    at.session_state["portal.signed_in_at"] = _time.time()
    at.run()
    _load_template(at, "lenet5")
    at.session_state["portal.user"] = "bob"  # alice signed out, bob signed in, one browser session
    at.run()
    assert_no_exception(at)
    assert editor(at).doc["name"] == "pipeline" and not editor(at).history
    as_the_browser(at, lambda: form(at, "number_input", "training.epochs").set_value(2))
    assert [d.name for d in DraftStore(portal_env / "home", "alice").list()] == ["lenet5"]
    [bobs] = DraftStore(portal_env / "home", "bob").list()
    assert DraftStore(portal_env / "home", "bob").load(bobs.id)[1].doc["training"]["epochs"] == 2
