"""Runs, code and cluster pages through AppTest (the real app.py, the real registry and executors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from portal.runs_view import run_label
from portal.users import default_local_user
from schedulers.base import JobStatus, RunState
from schedulers.reconcile import cancel_run
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until
from tests.portal.conftest import assert_no_exception, editor, form

REPO = Path(__file__).resolve().parents[2]


def _load_template(at, name: str) -> None:
    at.selectbox(key="toolbar.template").set_value(name).run()
    at.button(key="toolbar.load").click().run()
    assert_no_exception(at)


def _fake_run(registry: RunRegistry, user: str, name: str, state: RunState = RunState.COMPLETED,
              accuracies: tuple[float, ...] = (0.5, 0.8, 0.9)):
    spec = zoo.template("mnist_cnn").model_copy(update={"name": name})
    run = registry.create_run(user=user, spec_json=spec.to_json(), spec_hash=spec.spec_hash(), framework="torch",
                              scheduler="local", name=name)
    lines = [{"event": "start", "step": 0, "epoch": 0}]
    for i, acc in enumerate(accuracies):
        lines.append({"event": "epoch", "step": 10 * (i + 1), "epoch": i, "split": "val", "loss": 1 - acc,
                      "accuracy": acc})
    (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    (run.run_dir / "model").mkdir()
    (run.run_dir / "model" / "model.pt").write_bytes(b"weights")
    (run.run_dir / "run.log").write_text("epoch 1\nepoch 2\n", encoding="utf-8")
    if state != RunState.PENDING:
        registry.mark_submitted(run.id, "999999")
        registry.record_status(run.id, JobStatus(job_id="999999", state=state, exit_code=0 if state ==
                                                 RunState.COMPLETED else 1, reason="" if state ==
                                                 RunState.COMPLETED else "bad data"))
    registry.sync_metrics(run.id)
    return registry.get(run.id)


def test_runs_page_empty(app):
    at = app("pages/runs.py")
    assert [t.value for t in at.title] == ["Runs"]
    assert any("cannot run yet" in w.value for w in at.warning)  # the blank pipeline is not connected
    assert any("No runs yet" in c.value for c in at.caption)


def test_runs_page_shows_only_my_runs_with_curves_artifacts_and_compare(app, portal_env):
    me = default_local_user()
    registry = RunRegistry(home=portal_env / "home")
    mine = _fake_run(registry, me, "mine-a")
    mine_b = _fake_run(registry, me, "mine-b", RunState.FAILED, (0.3, 0.4))
    theirs = _fake_run(registry, "someone-else", "theirs")
    at = app("pages/runs.py")
    table = at.dataframe[0].value
    assert set(table["run"]) == {mine.id, mine_b.id} and theirs.id not in set(table["run"])
    assert set(at.selectbox(key="runs.selected").options) == {f"{run_label(r)} · {r.id}" for r in (mine, mine_b)}
    at.selectbox(key="runs.selected").set_value(mine.id).run()
    assert_no_exception(at)
    assert any(f"Run `{mine.id}` — COMPLETED" in m.value for m in at.markdown)
    assert any(m.value == "**Accuracy**" for m in at.markdown)
    assert len(at.get("vega_lite_chart")) >= 2
    labels = [b.label for b in at.get("download_button")]
    assert any(label.startswith("Download model model/model.pt") for label in labels)
    at.selectbox(key="runs.selected").set_value(mine_b.id).run()
    assert any("FAILED (exit code 1): bad data" in e.value for e in at.error)
    # compare: the selected run first, then my other one, named by pipeline and time
    compare = at.multiselect(key=f"runs.compare.{mine_b.id}")
    assert compare.value == [mine_b.id, mine.id] and theirs.id not in compare.options
    assert f"{run_label(mine)} · {mine.id}" in compare.proto.options


def test_cancel_only_reaches_my_own_runs(app, portal_env):
    me = default_local_user()
    registry = RunRegistry(home=portal_env / "home")
    pending = _fake_run(registry, me, "queued", RunState.PENDING)
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(pending.id).run()
    at.button(key="runs.cancel").click().run()
    at.button(key="runs.cancel_yes").click().run()  # asked first
    assert_no_exception(at)
    assert registry.get(pending.id).state == RunState.CANCELLED
    other = _fake_run(registry, "someone-else", "other", RunState.PENDING)
    with pytest.raises(Exception, match="no run"):
        cancel_run(registry, other.id, {}, user=me)  # what the page calls: another user's run is "not found"
    assert registry.get(other.id).state == RunState.PENDING


def test_open_in_editor_loads_the_runs_spec(app, portal_env):
    registry = RunRegistry(home=portal_env / "home")
    run = _fake_run(registry, default_local_user(), "from-a-run")
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(run.id).run()
    at.button(key="runs.open").click().run()
    assert editor(at).doc["name"] == "from-a-run"
    at.switch_page("pages/editor.py").run()
    assert form(at, "text_input", "meta.name").value == "from-a-run"


@pytest.mark.frameworks
def test_submit_runs_the_pipeline_with_the_local_executor(app, portal_env):
    at = app()
    _load_template(at, "mlp")
    form(at, "number_input", "training.epochs").set_value(2).run()
    at.switch_page("pages/runs.py").run()
    at.selectbox(key="runs.framework").set_value("torch").run()
    at.button(key="runs.submit").click().run()
    assert_no_exception(at)
    registry = RunRegistry(home=portal_env / "home")
    (run,) = registry.list_runs()
    assert run.user == default_local_user() and run.framework == "torch" and run.scheduler == "local"
    assert at.selectbox(key="runs.selected").value == run.id

    def done():
        at.run()
        return registry.get(run.id).is_final

    wait_until(done, timeout=300, interval=1.0, message=lambda: f"run {run.id}: {registry.get(run.id).state}")
    at.run()
    assert_no_exception(at)
    assert registry.get(run.id).state == RunState.COMPLETED, registry.log_tail(run.id)
    assert any(f"Run `{run.id}` — COMPLETED" in m.value for m in at.markdown)
    assert any(m.value == "**Accuracy**" for m in at.markdown)
    assert any(b.label.startswith("Download model model/model.pt") for b in at.get("download_button"))
    # resubmit the same spec, then cancel the new run
    at.button(key="runs.resubmit").click().run()
    assert_no_exception(at)
    again = next(r for r in registry.list_runs() if r.id != run.id)
    assert again.spec_hash == run.spec_hash and at.selectbox(key="runs.selected").value == again.id
    # the message names the newest submission, not the first one
    assert any(m.value.startswith(f"Submitted run {again.id}:") for m in at.success)
    assert not any(m.value.startswith(f"Submitted run {run.id}:") for m in at.success)
    at.button(key="runs.cancel").click().run()
    at.button(key="runs.cancel_yes").click().run()  # asked first

    def cancelled():
        at.run()  # the page reconciles the user's runs with the executor
        return registry.get(again.id).is_final

    wait_until(cancelled, timeout=120, interval=1.0,
               message=lambda: f"cancelled run {again.id}: {registry.get(again.id).state}")
    assert registry.get(again.id).state == RunState.CANCELLED


def test_code_page_shows_three_programs_side_by_side(app):
    at = app()
    _load_template(at, "mnist_cnn")
    at.switch_page("pages/code.py").run()
    assert_no_exception(at)
    heads = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert heads == ["#### torch", "#### keras", "#### paddle"]
    codes = [c.value for c in at.code]
    assert len(codes) == 3 and all("def " in c or "import" in c for c in codes)
    at.radio(key="code.file").set_value("model.py").run()
    assert all("FlowTrainModel" in c.value or "build_model" in c.value for c in at.code)
    zips = [b.label for b in at.get("download_button")]
    assert "Download all as zip" in zips and "Download torch program (zip)" in zips
    support = at.dataframe[0].value
    assert set(support["op"]) == {"Input", "Conv2d", "ReLU", "MaxPool2d", "Dropout", "Flatten", "Linear", "Output"}
    at.toggle(key="code.only_used").set_value(False).run()
    assert len(at.dataframe[0].value) > 30


def test_code_page_without_a_valid_pipeline(app):
    at = app("pages/code.py")
    assert any("problem(s)" in w.value for w in at.warning)


@pytest.mark.frameworks
@pytest.mark.slow
def test_equivalence_button_runs_the_check_in_a_subprocess(app):
    at = app()
    _load_template(at, "mlp")
    at.switch_page("pages/code.py").run()
    at.button(key="code.equivalence").click().run(timeout=900)
    assert_no_exception(at)
    assert any(s.value.startswith("Equivalent") for s in at.success), [e.value for e in at.error]
    frameworks = at.dataframe[1].value
    assert set(frameworks["framework"]) == {"torch", "keras", "paddle"}


def test_cluster_page_charts_frameworks_and_choice(app):
    at = app()
    _load_template(at, "mnist_cnn")
    at.switch_page("pages/cluster.py").run()
    assert_no_exception(at)
    no_gpus = "No GPUs on this machine." in [i.value for i in at.info]
    assert len(at.get("vega_lite_chart")) + no_gpus == 3  # CPUs, GPUs (or a line saying there are none), memory
    parts = at.dataframe[0].value
    assert list(parts["partition"]) == ["local"]
    fws = at.dataframe[2].value
    assert set(fws["framework"]) == {"torch", "keras", "paddle"} and all(fws["installed"])
    assert any(s.value.startswith("**torch** on partition **local**") for s in at.success)
    ranked = at.dataframe[3].value
    assert ranked.iloc[0]["framework"] == "torch" and ranked.iloc[0]["rank"] == 1
    # No calibration job has run in this home: every speed is the MACs model's, and said so.
    assert set(ranked["speed from"]) == {"MACs model"} and ranked.iloc[0]["samples/s"] > 0
    assert ranked.iloc[0]["time to result"].startswith("~")
    assert ranked.iloc[0]["could be"][0].isdigit() and ranked.iloc[0]["start-up"][0].isdigit()  # range and parts
    assert any("time to result: torch on local: " in m.value for m in at.markdown)


def test_every_page_renders_without_a_framework_import(portal_env):
    """The portal process never imports torch/tensorflow/paddle (a fresh interpreter checks it)."""
    script = f"""
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({str(REPO / 'app.py')!r}, default_timeout=120).run()
at.selectbox(key="toolbar.template").set_value("mnist_cnn").run()
at.button(key="toolbar.load").click().run()
for page in ("pages/code.py", "pages/cluster.py", "pages/runs.py", "pages/editor.py"):
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "tensorflow", "paddle", "keras", "jax"))
print("IMPORTED:", bad)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "IMPORTED: []" in proc.stdout, proc.stdout[-2000:]


def test_local_login_form_when_users_are_configured(portal_env, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from portal.users import hash_password
    from tests.portal.conftest import APP

    config = portal_env / "login.toml"
    config.write_text(f'home = "{portal_env / "home"}"\n[auth]\nmode = "local"\n[auth.local_users]\n'
                      f'carol = "{hash_password("pw", iterations=1000)}"\n', encoding="utf-8")
    monkeypatch.setenv("FLOWTRAIN_CONFIG", str(config))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.subheader or at.subheader[0].value == "Sign in"
    assert not at.get("component_instance"), "no page before signing in"
    at.text_input(key="login.name").set_value("carol")
    at.text_input(key="login.password").set_value("wrong")
    at.button[0].click().run()
    assert any("wrong password" in e.value for e in at.error)
    at.text_input(key="login.password").set_value("pw")
    at.button[0].click().run()
    assert_no_exception(at)
    assert at.session_state["portal.user"] == "carol"
    assert any("Signed in as **carol**" in c.value for c in at.sidebar.caption)
    assert "pbkdf2_sha256$1000$" not in config.read_text(encoding="utf-8")  # the older hash was upgraded
    assert not at.warning


def test_a_wrong_settings_file_is_reported_without_a_traceback(portal_env, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.portal.conftest import APP

    config = portal_env / "bad.toml"
    config.write_text('scheduler = "pbs"\n', encoding="utf-8")
    monkeypatch.setenv("FLOWTRAIN_CONFIG", str(config))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert any("scheduler = 'pbs'" in e.value and str(config) in e.value for e in at.error)


def test_portal_reads_the_settings_as_the_command_line_does(app, portal_env: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """No FLOWTRAIN_HOME: the runs live where the settings file's home says; FLOWTRAIN_SCHEDULER
    overrides the file (the same precedence as `python -m flowtrain`, see tests/settings)."""
    monkeypatch.delenv("FLOWTRAIN_HOME")
    monkeypatch.setenv("FLOWTRAIN_SCHEDULER", "slurm")
    at = app()
    assert any(c.value.endswith("scheduler: slurm") for c in at.sidebar.caption)
    monkeypatch.setenv("FLOWTRAIN_SCHEDULER", "local")
    at = app()  # another session of the same server process: nothing stale is cached
    assert any(c.value.endswith("scheduler: local") for c in at.sidebar.caption)
    at.switch_page("pages/runs.py").run()
    assert_no_exception(at)
    assert (portal_env / "home" / "flowtrain.db").is_file()


def test_session_mode_needs_the_session_secret(portal_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auth.mode = "session" (the Open OnDemand app): the portal's OS user, opened only with the secret."""
    from streamlit.testing.v1 import AppTest

    from tests.portal.conftest import APP

    secret = portal_env / "secret"
    secret.write_text("s3cr3t-0123456789abcdef\n", encoding="utf-8")
    config = portal_env / "session.toml"
    config.write_text(f'home = "{portal_env / "home"}"\n[auth]\nmode = "session"\nsecret_file = "{secret}"\n',
                      encoding="utf-8")
    monkeypatch.setenv("FLOWTRAIN_CONFIG", str(config))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert any("open it with the Connect button" in e.value for e in at.error)
    assert not any("Signed in as" in c.value for c in at.sidebar.caption)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["secret"] = "wrong-0123456789abcdef"
    at.run()
    assert any("no valid session secret" in e.value for e in at.error)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["secret"] = "s3cr3t-0123456789abcdef"
    at.run()
    assert not any("session secret" in e.value for e in at.error)
    assert any(c.value.startswith(f"Signed in as **{default_local_user()}**") for c in at.sidebar.caption)
