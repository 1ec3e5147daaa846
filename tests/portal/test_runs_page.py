"""The runs page's smaller promises: resume from the last checkpoint, a user's cancel shown as their
action, Compare starting from the selected run with runs named by pipeline and time, full job ids,
messages that stay."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from core import zoo
from core.codegen import generate
from core.validate import validate
from portal.resume import checkpoint_suffixes, last_checkpoint, seed
from portal.run_compare import legend
from portal.runs_view import run_label
from portal.users import default_local_user
from schedulers.base import JobRequest, JobStatus, RunState
from schedulers.launch import Checked, launch
from schedulers.registry.runs import RunRegistry
from schedulers.selector import Selection
from tests.helpers import wait_until
from tests.portal.conftest import assert_no_exception


def _run(registry: RunRegistry, name: str, state: RunState, job_id: str = "4242", reason: str = "",
         metrics: bool = True, checkpoints: tuple[int, ...] = ()):
    spec = zoo.template("mlp").model_copy(update={"name": name})
    run = registry.create_run(user=default_local_user(), spec_json=spec.to_json(), spec_hash=spec.spec_hash(),
                              framework="torch", scheduler="local", name=name)
    generate(spec, "torch").write(run.run_dir)
    if metrics:
        lines = [{"event": "epoch", "step": 10 * (i + 1), "epoch": i, "split": "val", "loss": 1 - a, "accuracy": a}
                 for i, a in enumerate((0.5, 0.7))]
        (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    for step in checkpoints:
        (run.run_dir / "checkpoints").mkdir(exist_ok=True)
        (run.run_dir / "checkpoints" / f"ckpt-{step}.pt").write_bytes(b"state")
    if state != RunState.PENDING:
        registry.mark_submitted(run.id, job_id)
        registry.record_status(run.id, JobStatus(job_id=job_id, state=state, exit_code=3, reason=reason))
    registry.sync_metrics(run.id)
    return registry.get(run.id)


@pytest.fixture
def registry(portal_env: Path) -> RunRegistry:
    return RunRegistry(home=portal_env / "home")


def _buttons(at) -> dict[str, str]:
    return {b.key: b.label for b in at.button if b.key}


# --------------------------------------------------------------------------- resume


@pytest.mark.parametrize("framework, suffixes", [("torch", (".pt",)), ("keras", (".npz",)),
                                                 ("paddle", (".npz",))])
def test_the_checkpoint_files_are_read_from_the_runs_own_program(tmp_path, framework, suffixes):
    generate(zoo.template("mlp"), framework).write(tmp_path)
    assert checkpoint_suffixes(tmp_path) == suffixes


def test_the_last_complete_checkpoint_is_found(tmp_path):
    generate(zoo.template("mlp"), "paddle").write(tmp_path)
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("ckpt-100.npz", "ckpt-200.npz.tmp"):
        (folder / name).write_bytes(b"x")  # 200 is still a temporary file: the program never finished writing it
    ckpt = last_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.step == 100 and [f.name for f in ckpt.files] == ["ckpt-100.npz"]
    assert last_checkpoint(tmp_path / "nowhere") is None


def test_a_resumed_job_finds_the_checkpoint_in_its_folder_when_it_is_submitted(tmp_path):
    generate(zoo.template("mlp"), "torch").write(tmp_path / "old")
    (tmp_path / "old" / "checkpoints").mkdir()
    (tmp_path / "old" / "checkpoints" / "ckpt-40.pt").write_bytes(b"state at 40")
    ckpt = last_checkpoint(tmp_path / "old")
    seen: list[list[str]] = []

    class Executor:  # the local scheduler, recording what the job's folder holds when it is submitted
        name = "local"

        def submit(self, request: JobRequest) -> str:
            seen.append(sorted(p.name for p in (request.run_dir / "checkpoints").iterdir()))
            return "7"

        def statuses(self, job_ids: list[str]) -> dict[str, JobStatus]:
            return {j: JobStatus(j, RunState.PENDING) for j in job_ids}

    spec = zoo.template("mlp")
    selection = Selection(framework="torch", partition="local", environment=None, python=None, reasons=[],
                          candidates=[])
    registry = RunRegistry(home=tmp_path / "home")
    run = launch(Checked(spec, validate(spec), "alice"), selection, registry=registry, scheduler="local",
                 executors={"local": Executor()}, before_submit=functools.partial(seed, checkpoint=ckpt))
    assert seen == [["ckpt-40.pt"]] and run.job_id == "7"
    assert (run.run_dir / "checkpoints" / "ckpt-40.pt").read_bytes() == b"state at 40"


def test_resume_is_offered_for_a_stopped_run_with_a_checkpoint(app, registry):
    stopped = _run(registry, "stopped", RunState.CANCELLED, checkpoints=(20, 40))
    done = _run(registry, "done", RunState.COMPLETED, checkpoints=(60,))
    bare = _run(registry, "bare", RunState.FAILED)
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(stopped.id).run()
    assert _buttons(at)["runs.resume"] == "Resume from step 40"
    assert "starts from epoch 1" in next(b for b in at.button if b.key == "runs.resubmit").help
    for run in (done, bare):  # a completed run is done; a failed one without a checkpoint has nothing to go on
        at.selectbox(key="runs.selected").set_value(run.id).run()
        assert "runs.resume" not in _buttons(at)


# --------------------------------------------------------------------------- cancel, job ids, messages


def test_my_cancel_is_my_action_and_the_message_stays(app, registry):
    pending = _run(registry, "queued", RunState.PENDING, metrics=False)
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(pending.id).run()
    at.button(key="runs.cancel").click().run()
    assert any(w.value.startswith(f"Cancel run {pending.id}?") for w in at.warning)  # asked first
    at.button(key="runs.cancel_no").click().run()
    assert registry.get(pending.id).state == RunState.PENDING and not [b for b in at.button if b.key == "runs.cancel_yes"]
    at.button(key="runs.cancel").click().run()
    at.button(key="runs.cancel_yes").click().run()
    assert_no_exception(at)
    assert registry.get(pending.id).state == RunState.CANCELLED
    assert any(i.value.startswith("Cancelled at your request") for i in at.info)
    assert not any("CANCELLED" in e.value for e in at.error), "a cancel the user asked for is no error"
    at.run()
    assert any(i.value == f"Cancel requested for run {pending.id}." for i in at.info), "the message stays"
    at.button(key="runs.notice.dismiss").click().run()
    assert not any(i.value.startswith("Cancel requested") for i in at.info)


def test_a_cancel_by_the_cluster_is_an_error(app, registry):
    run = _run(registry, "preempted", RunState.CANCELLED, reason="scancel by root: node drained")
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(run.id).run()
    assert any(e.value.startswith("CANCELLED (exit code 3)") for e in at.error)


def test_a_long_job_id_is_shown_whole(app, registry):
    long_id = "1234567890123456789_4242"
    run = _run(registry, "array", RunState.RUNNING, job_id=long_id)
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(run.id).run()
    assert any(c.value.startswith(f"Job {long_id} · ") for c in at.caption)


def test_the_restarts_are_shown_against_the_budget(app, registry):
    """A Slurm run that restarted once of its default budget of 2 shows ``1/2``, as ``status`` does."""
    spec = zoo.template("mlp").model_copy(update={"name": "restarted"})
    run = registry.create_run(user=default_local_user(), spec_json=spec.to_json(), spec_hash=spec.spec_hash(),
                              framework="torch", scheduler="slurm", name="restarted")
    registry.mark_submitted(run.id, "77")
    registry.add_event(run.id, "restart 1 of 2: rank 1 (n2) lost (killed by signal 9, SIGKILL); resumed from step 12")
    registry.record_status(run.id, JobStatus(job_id="77", state=RunState.COMPLETED, exit_code=0))
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(run.id).run()
    assert [m.value for m in at.metric if m.label == "Restarts"] == ["1/2"]


def test_compare_starts_from_the_selected_run_and_names_runs_by_pipeline_and_time(app, registry):
    a1 = _run(registry, "alpha", RunState.COMPLETED)
    _run(registry, "beta", RunState.COMPLETED)
    a2 = _run(registry, "alpha", RunState.COMPLETED)
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(a1.id).run()
    compare = at.multiselect(key=f"runs.compare.{a1.id}")
    assert compare.value == [a1.id, a2.id], "the selected run and the newest other run of the same pipeline"
    assert f"{run_label(a2)} · {a2.id}" in compare.proto.options and run_label(a1).startswith("alpha · ")
    assert len(at.get("vega_lite_chart")) >= 2  # loss and accuracy of both
    [table] = [t.value for t in at.table if "best" in t.value.columns]
    assert list(table.index) == [legend("alpha", "torch", a1.id), legend("alpha", "torch", a2.id)]
    assert table.index.nunique() == 2 and a1.id.endswith(table.index[0].rsplit(" · ", 1)[1])
    row = table.iloc[0].to_dict()
    assert {k: row[k] for k in ("framework", "scheduler", "epochs", "metric", "final", "best")} == {
        "framework": "torch", "scheduler": "local", "epochs": f"2/{zoo.template('mlp').training.epochs}",
        "metric": "val accuracy", "final": "0.7000", "best": "0.7000"}
    listed = next(d.value for d in at.dataframe if "restarts" in d.value.columns)
    assert set(listed["metric"]) == {"val accuracy 0.7000"}  # the runs table's metric column


def test_a_resumed_run_and_its_parent_link_to_each_other(app, registry):
    parent = _run(registry, "alpha", RunState.CANCELLED, checkpoints=(10,))
    child = _run(registry, "alpha", RunState.COMPLETED)
    seed(child.run_dir, last_checkpoint(parent.run_dir), parent=parent.id)
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(child.id).run()
    at.button(key=f"runs.kin.{parent.id}").click().run()
    assert at.selectbox(key="runs.selected").value == parent.id
    assert _buttons(at)[f"runs.kin.{child.id}"] == f"↓ Resumed as {child.id}"
    at.button(key=f"runs.kin.{child.id}").click().run()
    assert at.selectbox(key="runs.selected").value == child.id


# --------------------------------------------------------------------------- the editor's guidance


def test_template_descriptions_and_a_first_run_guide(app):
    at = app()
    [guide] = [e for e in at.expander if e.label == "New here? How the editor works"]
    assert guide.proto.expanded and any("Valid" in m.value for m in guide.markdown)
    options = at.selectbox(key="toolbar.template").proto.options
    assert "lenet5 — LeNet-5 (LeCun 1998) on sklearn digits upscaled to 32×32" in options
    at.selectbox(key="toolbar.template").set_value("lenet5").run()
    assert any("runs as shipped on the built-in sklearn:digits" in c.value for c in at.caption)
    at.selectbox(key="toolbar.template").set_value("alexnet").run()
    assert any("needs your data: a folder with one sub-folder of images" in c.value for c in at.caption)


# --------------------------------------------------------------------------- a real resume


@pytest.mark.frameworks
def test_a_resumed_run_starts_from_the_stopped_runs_checkpoint(app, registry):
    """mlp with torch on the local executor: run, cancel after a checkpoint, resume; the new run's
    program reports the step it resumed from (its metrics' start record)."""
    at = app()
    at.selectbox(key="toolbar.template").set_value("mlp").run()
    at.button(key="toolbar.load").click().run()
    ed = at.session_state["portal.editor"]
    ed.set_field("training", ("epochs",), 50)
    ed.set_field("training", ("checkpoint", "every_steps"), 5)
    at.switch_page("pages/runs.py").run()
    at.selectbox(key="runs.framework").set_value("torch").run()
    at.button(key="runs.submit").click().run()
    [first] = registry.list_runs()
    wait_until(lambda: last_checkpoint(first.run_dir) is not None, timeout=300, interval=0.5,
               message=lambda: f"a checkpoint of {first.id}: {registry.log_tail(first.id)}")
    at.button(key="runs.cancel").click().run()
    at.button(key="runs.cancel_yes").click().run()  # asked first

    def stopped() -> bool:
        at.run()
        return registry.get(first.id).is_final

    wait_until(stopped, timeout=120, interval=1.0, message=lambda: f"{first.id}: {registry.get(first.id).state}")
    ckpt = last_checkpoint(first.run_dir)
    assert ckpt is not None and _buttons(at)["runs.resume"] == f"Resume from step {ckpt.step:,}"
    at.button(key="runs.resume").click().run()
    assert_no_exception(at)
    resumed = next(r for r in registry.list_runs() if r.id != first.id)

    def started() -> bool:
        registry.sync_metrics(resumed.id)
        return any(m.get("event") == "start" for m in registry.metrics(resumed.id))

    wait_until(started, timeout=300, interval=1.0, message=lambda: registry.log_tail(resumed.id))
    start = next(m for m in registry.metrics(resumed.id) if m.get("event") == "start")
    assert start["resumed_from_step"] == ckpt.step
    at.button(key="runs.cancel").click().run()
    at.button(key="runs.cancel_yes").click().run()  # asked first
