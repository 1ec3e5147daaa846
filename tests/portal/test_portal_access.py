"""The portal as a shared service: data sources checked at submit, resubmit and import; sessions that
expire; one equivalence check and one probe at a time per user; downloads that are bounded and never
follow links. The real app.py through AppTest (tests/portal/conftest.py), nothing started."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core import zoo
from portal import code_view, limits
from portal.editor_state import Editor
from portal.editor_view import import_spec
from portal.users import default_local_user, hash_password
from schedulers.registry.runs import RunRegistry
from settings import load_settings
from tests.portal.conftest import APP, TIMEOUT_S, assert_no_exception, editor

REPO = Path(__file__).resolve().parents[2]


def _hostile_doc(source: str = "/proc/self/environ") -> dict:
    doc = json.loads(zoo.template("mlp").to_json())
    doc["data"].update(source=source, format="csv", preprocessing=[], input_shape=[784], num_classes=10)
    return doc


def test_submit_refuses_a_source_outside_the_data_roots(app, portal_env):
    at = app()
    ed = editor(at)
    ed.load_spec(zoo.template("mlp"))
    for key, value in _hostile_doc()["data"].items():
        ed.set_field("data", (key,), value)
    at.switch_page("pages/runs.py").run()
    assert_no_exception(at)
    # the Runs page offers no Submit for it, and says why (the submission path itself refuses it too:
    # tests/schedulers/test_launch_access.py, tests/cli/test_access.py)
    assert not [b for b in at.button if b.key == "runs.submit"]
    warnings = " ".join(w.value for w in at.warning)
    assert "/proc/self/environ" in warnings and "not under your data roots" in warnings
    assert str((portal_env / "data").resolve()) in warnings  # the user's roots are named
    assert RunRegistry(home=portal_env / "home").list_runs() == []


def test_resubmit_refuses_a_source_outside_the_data_roots(app, portal_env):
    """A run recorded before the check (or by a tampered registry) cannot be resubmitted as it is."""
    registry = RunRegistry(home=portal_env / "home")
    spec_json = json.dumps(_hostile_doc())
    old = registry.create_run(user=default_local_user(), spec_json=spec_json, spec_hash="h", framework="torch",
                              scheduler="local", name="old")
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(old.id).run()
    at.button(key="runs.resubmit").click().run()
    assert_no_exception(at)
    assert any("data.source" in e.value and "/proc/self/environ" in e.value for e in at.error)
    assert [r.id for r in registry.list_runs()] == [old.id]


def test_import_resolves_the_source_and_refuses_oversize_or_outside(portal_env):
    settings = load_settings()
    user = default_local_user()
    ed = Editor()
    before = ed.doc
    hostile = json.dumps(_hostile_doc()).encode()
    assert not import_spec(ed, "hostile.json", len(hostile), lambda: hostile, settings, user)
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error" and "data.source" in notice.text and ed.doc is before

    def never_read() -> bytes:
        raise AssertionError("an oversize upload must be refused before it is read")

    assert not import_spec(ed, "huge.json", 93 * 2**20, never_read, settings, user)
    [notice] = ed.notices_in("toolbar")
    assert "93.0 MB" in notice.text and "at most 10 MB" in notice.text
    (portal_env / "data" / "t.csv").write_text("a,label\n1,0\n", encoding="utf-8")
    good = json.dumps(_hostile_doc("t.csv")).encode()
    assert import_spec(ed, "good.json", len(good), lambda: good, settings, user)
    assert ed.doc["data"]["source"] == str((portal_env / "data" / "t.csv").resolve())


def test_uploads_are_limited_by_the_server_too():
    """Streamlit's uploaders hold an upload in memory: the server refuses more than the largest of them needs;
    an ONNX model goes through the portal's own upload route (serve.py), to disk, up to the site's limit."""
    config = (REPO / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert f"maxUploadSize = {limits.MAX_TRY_UPLOAD_MB} " in config and 'address = "127.0.0.1"' in config
    assert load_settings(environ={}).max_onnx_upload_mb == 2048
    script = (REPO / "scripts" / "portal.sh").read_text(encoding="utf-8")
    assert "streamlit run serve.py" in script and "--server.maxUploadSize" not in script
    assert limits.MAX_UPLOAD_MB == 10


def test_local_sign_in_expires(portal_env):
    config = Path(portal_env / "flowtrain.toml")
    config.write_text(config.read_text(encoding="utf-8") + '[auth]\nmode = "local"\nsession_hours = 1\n'
                      f'[auth.local_users]\nalice = "{hash_password("pw", iterations=1000)}"\n', encoding="utf-8")

    def signed_in(ago_s: float) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
        at.session_state["portal.user"] = "alice"
        at.session_state["portal.signed_in_at"] = time.time() - ago_s
        at.run()
        assert_no_exception(at)
        return at

    fresh = signed_in(3500)
    assert any("Signed in as **alice**" in c.value for c in fresh.sidebar.caption)
    stale = signed_in(3601)  # an hour and a second ago
    assert any("session ended" in i.value for i in stale.info) and any(s.value == "Sign in" for s in stale.subheader)
    assert "portal.user" not in stale.session_state


def test_one_equivalence_check_at_a_time_per_user(app, monkeypatch: pytest.MonkeyPatch):
    def never(spec_json: str) -> dict:
        raise AssertionError("a second equivalence check must not start")

    monkeypatch.setattr(code_view, "run_equivalence", never)
    at = app()
    editor(at).load_spec(zoo.template("mlp"))
    at.switch_page("pages/code.py").run()
    with limits.GATE.hold("equivalence", default_local_user()):  # the user's check in another tab
        at.button(key="code.equivalence").click().run()
    assert_no_exception(at)
    assert any("already running" in w.value for w in at.warning)
    assert not limits.GATE.busy("equivalence", default_local_user())


def test_one_probe_at_a_time_per_user(app):
    at = app("pages/cluster.py")
    with limits.GATE.hold("probe", default_local_user()):
        at.button(key="cluster.refresh").click().run()
    assert_no_exception(at)
    assert any("already running" in e.value for e in at.error)
    at.button(key="cluster.refresh").click().run()  # free again: the probe runs
    assert not any("already running" in e.value for e in at.error)


def test_downloads_are_bounded_and_never_follow_links(app, portal_env, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(limits, "MAX_DOWNLOAD_BYTES", 1000)
    registry = RunRegistry(home=portal_env / "home")
    run = registry.create_run(user=default_local_user(), spec_json=zoo.template("mlp").to_json(), spec_hash="h",
                              framework="torch", scheduler="local", name="files")
    secret = portal_env / "secret.txt"
    secret.write_text("TOKEN=1\n", encoding="utf-8")
    (run.run_dir / "train.py").write_text("print(1)\n", encoding="utf-8")
    (run.run_dir / "model").mkdir()
    (run.run_dir / "model" / "big.bin").write_bytes(b"x" * 5000)
    (run.run_dir / "stolen.txt").symlink_to(secret)
    at = app("pages/runs.py")
    labels = [b.label for b in at.get("download_button")]
    assert any("train.py" in label for label in labels)
    assert not any("stolen" in label or "big.bin" in label for label in labels)
    assert any("not offered here" in i.value and str(run.run_dir) in i.value
               and f"python -m flowtrain fetch {run.id} model/big.bin" in i.value for i in at.info)
    assert any("model/big.bin (5,000 B): over the browser's" in c.value for c in at.caption)
