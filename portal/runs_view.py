"""The runs page: submit the current pipeline, list the user's runs, follow one live, compare several.

Everything goes through the run registry (:mod:`schedulers.registry.runs`) and :mod:`schedulers.launch`; the
registry is asked with the signed-in user, so nobody sees or cancels another user's run.
"""

from __future__ import annotations

import functools
import io
import shlex
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from core.errors import FlowTrainError, SpecError
from core.frameworks import FRAMEWORKS
from portal import data_needs, limits, sweeps_view, users
from portal.curves import curve_rows, last_values, metrics_present, progress
from portal.editor_state import Editor
from portal.resume import Checkpoint, last_checkpoint, lineage, resumed_from, seed
from portal.run_compare import compare_row, headline, legend
from portal.try_model import try_section
from schedulers.accounting import record_words
from schedulers.base import RunState, SchedulerError
from schedulers.model_export import ExportWorker
from schedulers.reconcile import cancel_run, fetch_accounting, reconcile, restart_tally
from schedulers.registry.records import ReconcileReport, Run, RunNotFound
from schedulers.registry.runs import RunRegistry
from settings import Settings

REFRESH_S = 2.0
CONFIRM_CANCEL = "runs.confirm_cancel"  # the run whose Cancel was pressed, until confirmed or kept
MAX_LISTED = 500
STATE_ICONS = {"PENDING": ":material/hourglass_empty:", "RUNNING": ":material/directions_run:",
               "COMPLETED": ":material/check_circle:", "FAILED": ":material/error:",
               "CANCELLED": ":material/cancel:", "TIMEOUT": ":material/timer_off:", "NODE_FAIL": ":material/dns:",
               "PREEMPTED": ":material/pause_circle:", "REQUEUED": ":material/replay:", "UNKNOWN": ":material/help:"}
ARTIFACT_TITLES = {"model": "Model", "checkpoint": "Checkpoints", "code": "Code", "log": "Logs",
                   "metrics": "Metrics", "other": "Other files"}


@st.cache_resource(show_spinner=False)
def registry_for(home: str) -> RunRegistry:
    return RunRegistry(home=home)


@st.cache_resource(show_spinner=False)
def executors_for(home: str) -> Any:
    from schedulers.launch import Executors

    return Executors(home)


@st.cache_resource(show_spinner=False)
def exporter_for(home: str) -> ExportWorker:
    """The portal process's one export worker: writes completed runs' ``model.onnx`` off the pages."""
    return ExportWorker(registry_for(home))


def refresh_states(registry: RunRegistry, executors: Any, user: str, *, run_ids: list[str] | None = None,
                   exporter: ExportWorker | None = None) -> ReconcileReport:
    """What a render of the Runs page does to the states: the scheduler's answer recorded (one query
    per scheduler), nothing more. A run that completed has its ``model.onnx`` pending in the registry;
    the export worker, woken here, writes it in its own thread, so no render waits for a framework.
    The worker starts with the first render (its first pass: exports left pending by a process that
    died after recording COMPLETED)."""
    worker = exporter or exporter_for(str(registry.home))
    report = reconcile(registry, executors, run_ids=run_ids, user=user)
    if any(c.state == RunState.COMPLETED.value for c in report.changes):
        worker.wake()
    return report


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "–"


# --------------------------------------------------------------------------- submit


def _do_submit(spec: Any, settings: Settings, user: str, framework: str, registry: RunRegistry,
               executors: Any, before_submit: Callable[[Path], Any] | None = None) -> Run | None:
    """The steps of :func:`schedulers.launch.submit_run`, one by one so that the page shows each:
    check (pin, validate once) → plan → launch. ``before_submit``: see :func:`schedulers.launch.launch`."""
    from schedulers.launch import check, launch, plan

    with st.status("Submitting the pipeline…", expanded=True) as status:
        try:
            checked = check(spec, user, settings)
            status.write("Choosing the framework and partition (installed frameworks, free resources)…")
            selection = plan(checked, scheduler=settings.scheduler, framework=framework, executors=executors,
                             settings=settings, user=user)
            if selection.reasons:
                status.write(selection.reasons[0])
            status.write("Generating the training program and submitting it…")
            run = launch(checked, selection, registry=registry, scheduler=settings.scheduler, executors=executors,
                         before_submit=before_submit)
        except (FlowTrainError, SchedulerError) as err:
            status.update(label="Submission failed", state="error")
            st.error(str(err))
            return None
        status.update(label=f"Submitted run {run.id}: {run.framework} on {run.scheduler}, {run.state.value}",
                      state="complete", expanded=False)
    return run


def submit_section(ed: Editor, settings: Settings, user: str, registry: RunRegistry, executors: Any) -> None:
    st.subheader("Submit")
    try:
        spec = ed.valid_spec()
    except SpecError as err:
        st.warning(f"The pipeline **{ed.doc.get('name')}** cannot run yet: {len(err.problems)} problem(s). "
                   "Fix them on the Editor page.")
        return
    need = data_needs.data_problem(spec.data.model_dump(mode="json"), users.data_roots(user, settings),
                                   settings.builtin_datasets)
    if need is not None:
        st.warning(f"The pipeline **{spec.name}** cannot run yet: its data layer {need.message}. Point it at "
                   f"{need.expected} on the Editor page.", icon=":material/folder_off:")
        return
    t = spec.training
    st.markdown(f"Pipeline **{spec.name}** · data `{spec.data.source}` · {len(spec.model.nodes)} nodes · "
                f"{t.epochs} epoch(s) · {t.resources.nodes} node(s) × {t.resources.gpus_per_node} GPU(s) · "
                f"scheduler **{settings.scheduler}**")
    a, b = st.columns([2, 3], vertical_alignment="bottom")
    choices = ["auto", *FRAMEWORKS]
    framework = a.selectbox("Framework", choices, index=choices.index(t.framework), key="runs.framework",
                            help="auto: the selector chooses (see the Cluster page for its reasons).")
    if b.button("Submit run", key="runs.submit", type="primary"):
        run = _do_submit(spec, settings, user, framework, registry, executors)
        if run is not None:
            st.session_state["runs.selected"] = run.id
            # kept for the next reruns: the status box above is drawn only in this one
            st.session_state["runs.submitted"] = f"Submitted run {run.id}: {run.framework} on {run.scheduler}."
    elif st.session_state.get("runs.submitted"):
        st.success(st.session_state["runs.submitted"], icon=":material/check_circle:")


# --------------------------------------------------------------------------- list


def runs_table(runs: list[Run], registry: RunRegistry) -> None:
    def metric(r: Run) -> str:
        head = headline(registry.metrics(r.id, event="epoch")) if r.metrics_count else None
        return head.cell() if head is not None else "–"

    rows = [{
        "run": r.id, "name": r.name, "state": r.state.value, "metric": metric(r),
        "framework": r.framework, "scheduler": r.scheduler, "partition": r.partition or "–",
        "duration": duration(r.duration), "restarts": r.restarts,
        "exit": "–" if r.exit_code is None and r.signal is None else (
            f"signal {r.signal}" if r.signal is not None else str(r.exit_code)),
        "created": when(r.created), "sweep": f"{r.sweep_id} #{r.sweep_point}" if r.sweep_id else "–",
    } for r in runs]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"metric": st.column_config.TextColumn(width="medium")})  # "val accuracy 0.9123"


# --------------------------------------------------------------------------- detail


def _chart(rows: list[dict[str, Any]], metric: str, color: str = "series") -> None:
    df = pd.DataFrame([r for r in rows if r["metric"] == metric])
    if df.empty:
        return
    st.markdown(f"**{metric.capitalize()}**")
    chart = alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("step:Q", title="step", axis=alt.Axis(format="~d", tickMinStep=1)),
        y=alt.Y("value:Q", title=metric, scale=alt.Scale(zero=False), axis=alt.Axis(format="~g")),
        color=alt.Color(f"{color}:N", title=None), tooltip=[color, "step", "epoch", "value"],
    ).properties(height=260)
    st.altair_chart(chart, width="stretch")


def _cancel(registry: RunRegistry, executors: Any, run_id: str, user: str) -> None:
    st.session_state.pop(CONFIRM_CANCEL, None)
    try:
        cancel_run(registry, run_id, executors, user)
        st.session_state["runs.notice"] = ("info", f"Cancel requested for run {run_id}.")
    except (FlowTrainError, SchedulerError) as err:
        st.session_state["runs.notice"] = ("error", f"Could not cancel {run_id}: {err}")


def _open_in_editor(ed: Editor, run: Run) -> None:
    try:
        ed.load_spec(run.spec())
    except FlowTrainError as err:
        st.session_state["runs.notice"] = ("error", f"Could not load the spec of {run.id}: {err}")
        return
    from portal.editor_view import _after_replace

    _after_replace(ed)
    st.session_state["runs.notice"] = ("info", f"Loaded the spec of run {run.id} into the editor.")


def _artifact_bytes(registry: RunRegistry, run_id: str, rel: str) -> bytes:
    """One artifact's bytes, read when its button is clicked (Streamlit then serves them from memory)."""
    with registry.open_artifact(run_id, rel) as fh:
        return fh.read(limits.MAX_DOWNLOAD_BYTES + 1)


def _zip(registry: RunRegistry, run_id: str, paths: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in paths:
            with registry.open_artifact(run_id, rel) as src, zf.open(rel, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return buf.getvalue()


def artifacts_section(registry: RunRegistry, run: Run) -> None:
    """Download buttons by kind. Files are opened through the registry (no symbolic links followed)
    and read only when clicked; a file or zip over :data:`portal.limits.MAX_DOWNLOAD_BYTES` is not
    offered in the browser (the portal would hold it in memory): its path is shown instead."""
    arts = registry.artifacts(run.id)
    if not arts:
        st.caption("No files yet.")
        return
    by_kind: dict[str, list[Any]] = {}
    for a in arts:
        by_kind.setdefault(a.kind, []).append(a)
    limit = limits.MAX_DOWNLOAD_BYTES
    too_big: list[str] = []
    cols = st.columns(3)
    i = 0
    for kind in ("model", "code", "log", "checkpoint", "metrics", "other"):
        items = by_kind.get(kind)
        if not items:
            continue
        with cols[i % 3]:
            st.markdown(f"**{ARTIFACT_TITLES[kind]}**")
            for a in items[:20]:
                if a.size > limit:
                    too_big.append(a.path)
                    st.caption(f"{a.path} ({a.size:,} B): over the browser's {limit // 2**20} MB limit; "
                               f"`{fetch_command(run.id, a.path)}`")
                    continue
                st.download_button(f"{'Download model' if kind == 'model' else '⬇'} {a.path} ({a.size:,} B)",
                                   data=lambda rel=a.path: _artifact_bytes(registry, run.id, rel),
                                   file_name=Path(a.path).name, key=f"runs.dl.{run.id}.{a.path}", on_click="ignore")
            rels = [a.path for a in items]
            if kind in ("code", "checkpoint", "log") and len(items) > 1 and sum(a.size for a in items) <= limit:
                st.download_button(f"⬇ all {ARTIFACT_TITLES[kind].lower()} (zip)",
                                   data=lambda r=rels: _zip(registry, run.id, r), file_name=f"{run.id}-{kind}.zip",
                                   key=f"runs.zip.{run.id}.{kind}", on_click="ignore")
        i += 1
    if too_big:
        commands = "\n".join(fetch_command(run.id, path) for path in too_big)
        st.info(f"{len(too_big)} file(s) over {limit // 2**20} MB are not offered here: the portal would hold each "
                f"one in memory while serving it (Streamlit's download button does). Copy them with the command "
                f"line, or from the run directory {run.run_dir}:\n```\n{commands}\n```")


def fetch_command(run_id: str, path: str) -> str:
    """The command line that copies one file of a run out, in any size (``flowtrain fetch``)."""
    return shlex.join(["python", "-m", "flowtrain", "fetch", run_id, path])


def _live(registry: RunRegistry, executors: Any, run_id: str, user: str, was_final: bool) -> None:
    report = refresh_states(registry, executors, user, run_ids=[run_id])
    for err in report.errors:
        st.warning(f"State not refreshed: {err}")
    try:
        run = registry.get(run_id, user)
    except RunNotFound:
        st.error(f"No run {run_id} for {user}.")
        return
    if not was_final and run.is_final:
        st.rerun()  # the whole page: the table, the buttons and the refresh rate change
    records = registry.metrics(run.id)
    icon = STATE_ICONS.get(run.state.value, "")
    st.markdown(f"### {icon} Run `{run.id}` — {run.state.value}")
    spec_epochs = None
    try:
        spec_epochs = run.spec().training.epochs
    except FlowTrainError:
        pass
    epoch, epochs, speed = progress(records, spec_epochs)
    c = st.columns(5)
    c[0].metric("Framework", run.framework)
    c[1].metric("Scheduler", run.scheduler if run.scheduler == "local" else f"{run.scheduler}/{run.partition}")
    c[2].metric("Duration", duration(run.duration))
    c[3].metric("Epoch", f"{epoch}/{epochs}" if epochs else str(epoch))
    used, budget = restart_tally(registry, run)  # within the budget of training.restarts, as `status` says
    c[4].metric("Restarts", f"{used}/{budget}" if budget else str(run.restarts))
    # the job id in full (a metric cuts a long one off), and where the run's files are
    st.caption(f"Job {run.job_id or '– (not submitted)'} · {when(run.created)} · folder {run.run_dir}"
               + (f" · {speed:,.0f} samples/s (last logged)" if speed else ""))
    if run.state in (RunState.FAILED, RunState.TIMEOUT, RunState.NODE_FAIL, RunState.CANCELLED):
        code = f"signal {run.signal}" if run.signal is not None else f"exit code {run.exit_code}"
        if run.state == RunState.CANCELLED and cancelled_by_user(registry, run):
            st.info(f"Cancelled at your request ({code})." + (f" {run.reason}." if run.reason else ""),
                    icon=":material/cancel:")
        else:
            st.error(f"{run.state.value} ({code})" + (f": {run.reason}" if run.reason else ""))
    if run.is_final and run.scheduler == "slurm":
        try:
            record = fetch_accounting(registry, run.id, executors, user)
        except SchedulerError as err:
            st.warning(f"No accounting record: {err}")
        else:
            if record:
                st.caption("Slurm accounting: " + record_words(record))
    rows = curve_rows(records)
    metrics = metrics_present(rows)
    if metrics:
        last = last_values(records)
        if last:
            st.caption(" · ".join(f"{k} {v:.4g}" for k, v in sorted(last.items())))
        cols = st.columns(len(metrics))
        for col, metric in zip(cols, metrics, strict=True):
            with col:
                _chart(rows, metric)
    else:
        st.caption("No metrics yet." if not run.is_final else "This run wrote no metrics.")
    with st.expander("Log (last lines)", expanded=run.state in (RunState.FAILED, RunState.TIMEOUT)):
        st.code(registry.log_tail(run.id, 40) or run.log_tail or "(empty)", language=None)
    with st.expander("State history"):
        st.dataframe(pd.DataFrame([{"time": when(h.time), "state": h.state, "detail": h.detail}
                                   for h in registry.history(run.id)]), hide_index=True, width="stretch")
    if run.selection and run.selection.get("reasons"):
        with st.expander("Why this framework and partition"):
            st.markdown("\n".join(f"- {r.strip().lstrip('- ')}" for r in run.selection["reasons"]))


def cancelled_by_user(registry: RunRegistry, run: Run) -> bool:
    """The run was cancelled through FlowTrain (its history says who asked), not by the cluster."""
    return any(h.detail.startswith(f"cancel requested by {run.user}") for h in registry.history(run.id)) \
        or run.reason.startswith(f"cancelled by {run.user}")


def run_label(run: Run) -> str:
    """How a run is named on the page: its pipeline's name and when it was created."""
    return f"{run.name} · {when(run.created)}"


def _resubmit(spec_of: Run, settings: Settings, user: str, registry: RunRegistry, executors: Any,
              checkpoint: Checkpoint | None = None) -> None:
    """A new run of ``spec_of``'s spec and framework; from ``checkpoint`` (copied into the new run's
    folder before its job is submitted) when given."""
    try:
        spec = spec_of.spec()
    except FlowTrainError as err:
        st.error(str(err))
        return
    new = _do_submit(spec, settings, user, spec_of.framework, registry, executors,
                     None if checkpoint is None else functools.partial(seed, checkpoint=checkpoint, parent=spec_of.id))
    if new is not None:
        st.session_state["runs.pending_select"] = new.id
        st.session_state["runs.submitted"] = f"Submitted run {new.id}: {new.framework} on {new.scheduler}."
        st.rerun()


def detail_section(ed: Editor, settings: Settings, user: str, registry: RunRegistry, executors: Any,
                   runs: list[Run]) -> None:
    ids = [r.id for r in runs]
    if st.session_state.get("runs.selected") not in ids:
        st.session_state["runs.selected"] = ids[0]
    by_id = {r.id: r for r in runs}
    run_id = st.selectbox("Run", ids, key="runs.selected",
                          format_func=lambda i: f"{run_label(by_id[i])} · {i}")
    run = by_id[run_id]
    final = run.is_final
    live = st.fragment(run_every=None if final else REFRESH_S)(_live)
    live(registry, executors, run_id, user, final)
    family = lineage(run, runs)  # a resumed run and the run it went on from name each other, linked both ways
    if family:
        st.caption(family)
        parent = resumed_from(run.run_dir)
        kin = ([parent[0]] if parent is not None and parent[0] in by_id else []) + [
            r.id for r in runs if r.id != run.id and (resumed_from(r.run_dir) or ("",))[0] == run.id]
        for col, other in zip(st.columns(max(len(kin), 1) + 2)[:len(kin)], kin, strict=False):
            col.button(("↑ Parent " if parent and other == parent[0] else "↓ Resumed as ") + other,
                       key=f"runs.kin.{other}", on_click=st.session_state.__setitem__, args=("runs.selected", other))
    # a stopped run with a checkpoint can go on from it (see portal/resume.py)
    ckpt = last_checkpoint(run.run_dir) if final and run.state != RunState.COMPLETED else None
    a, b, d, c, _ = st.columns([1, 1, 1.4, 1, 1.6])
    a.button("Cancel run", key="runs.cancel", disabled=final, on_click=st.session_state.__setitem__,
             args=(CONFIRM_CANCEL, run_id))
    if b.button("Resubmit", key="runs.resubmit",
                help="A new run of the same pipeline and framework, in a new run folder: it starts from epoch 1."):
        _resubmit(registry.get(run_id, user), settings, user, registry, executors)
    if ckpt is not None and d.button(
            f"Resume from step {ckpt.step:,}", key="runs.resume",
            help=f"A new run of the same pipeline and framework that starts from this run's last checkpoint (step "
                 f"{ckpt.step:,}, copied into the new run's folder); its curves begin there."):
        _resubmit(registry.get(run_id, user), settings, user, registry, executors, ckpt)
    c.button("Open in editor", key="runs.open", on_click=_open_in_editor, args=(ed, registry.get(run_id, user)))
    if st.session_state.get(CONFIRM_CANCEL) == run_id and not final:
        st.warning(f"Cancel run {run_id}? Its job is stopped; the files it wrote so far stay.")
        x, y, _ = st.columns([1, 1, 3])
        x.button("Yes, cancel it", key="runs.cancel_yes", type="primary", on_click=_cancel,
                 args=(registry, executors, run_id, user))
        y.button("Keep it running", key="runs.cancel_no", on_click=st.session_state.pop, args=(CONFIRM_CANCEL, None))
    st.markdown("#### Artifacts")
    artifacts_section(registry, registry.get(run_id, user))
    try_section(registry, run_id, user)  # completed runs only


def _planned_epochs(registry: RunRegistry, run_id: str) -> int | None:
    """The epochs the run's spec asked for (``None`` when its spec cannot be read)."""
    try:
        return int(registry.get(run_id).spec().training.epochs)
    except (FlowTrainError, ValueError):
        return None


def compare_section(registry: RunRegistry, runs: list[Run], selected: str | None = None) -> None:
    """A table of several runs (name, framework, scheduler, epochs, final and best headline metric, duration,
    samples/s) and their curves; starts with the selected run and the newest other one (of the same
    pipeline when there is one); each run named ``name · framework · short id`` in the legends."""
    st.subheader("Compare runs")
    with_metrics = [r for r in runs if r.metrics_count]
    ids = [r.id for r in with_metrics]
    by_id = {r.id: r for r in with_metrics}
    default: list[str] = []
    if selected in by_id:
        others = [r for r in with_metrics if r.id != selected]
        same = [r for r in others if r.name == by_id[selected].name]
        default = [selected] + [r.id for r in (same or others)[:1]]
    chosen = st.multiselect("Runs to compare", ids, default=default, key=f"runs.compare.{selected}",
                            max_selections=8, format_func=lambda i: f"{run_label(by_id[i])} · {i}")
    if len(chosen) < 2:
        st.caption("Choose two or more runs with metrics.")
        return
    split = st.radio("Split", ["val", "train"], horizontal=True, key="runs.compare_split")
    labels = {rid: legend(by_id[rid].name, by_id[rid].framework, rid) for rid in chosen}
    if len(set(labels.values())) < len(labels):  # two runs whose ids share their random tail
        labels = {rid: f"{by_id[rid].name} · {by_id[rid].framework} · {rid}" for rid in chosen}
    records = {rid: registry.metrics(rid) for rid in chosen}
    table = [compare_row(by_id[rid], records[rid], _planned_epochs(registry, rid), duration(by_id[rid].duration))
             for rid in chosen]
    for row, rid in zip(table, chosen, strict=True):
        row["run"] = labels[rid]
    st.table(pd.DataFrame(table).set_index("run"))  # a few rows, as text (legible, and found by a search)
    rows = []
    for rid in chosen:
        rows += [r for r in curve_rows(records[rid], run=labels[rid]) if r["split"] == split]
    metrics = metrics_present(rows)
    cols = st.columns(max(len(metrics), 1))
    for col, metric in zip(cols, metrics, strict=False):
        with col:
            _chart(rows, metric, color="run")


def page(ed: Editor, settings: Settings, user: str) -> None:
    registry = registry_for(str(settings.home))
    executors = executors_for(str(settings.home))
    st.title("Runs")
    pending = st.session_state.pop("runs.pending_select", None)
    if pending:
        st.session_state["runs.selected"] = pending
    notice = st.session_state.get("runs.notice")  # stays until dismissed or replaced
    if notice:
        text, close = st.columns([24, 1], vertical_alignment="center")
        (text.error if notice[0] == "error" else text.info)(notice[1])
        close.button("✕", key="runs.notice.dismiss", on_click=st.session_state.pop, args=("runs.notice", None),
                     help="Dismiss this message")
    submit_section(ed, settings, user, registry, executors)
    st.divider()
    report = refresh_states(registry, executors, user)
    for err in report.errors:
        st.warning(f"States not refreshed: {err}")
    runs = registry.list_runs(user=user, limit=MAX_LISTED)
    st.subheader(f"Your runs ({len(runs)})")
    if not runs:
        st.caption("No runs yet: submit the pipeline above.")
        return
    runs_table(runs, registry)
    sweeps_view.sweeps_section(registry, executors, user)
    st.divider()
    detail_section(ed, settings, user, registry, executors, runs)
    st.divider()
    compare_section(registry, runs, st.session_state.get("runs.selected"))
