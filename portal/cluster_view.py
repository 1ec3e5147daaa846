"""The cluster page: partitions and nodes (CPU/GPU/memory use as charts), the frameworks of each
execution environment, and the framework and partition the selector would choose for the current
pipeline, with its reasons."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from core.errors import FlowTrainError, SpecError
from core.frameworks import FRAMEWORKS
from portal import limits
from portal.editor_state import Editor
from portal.runs_view import executors_for
from schedulers.base import SchedulerError
from settings import Settings

RESOURCES = ("CPUs", "GPUs", "Memory GB")
USES = ("allocated", "idle", "down")  # down: on nodes that are down, drained or otherwise not usable
USE_COLOURS = ("#1f77b4", "#2ca02c", "#9e9e9e")
BAR_PX = 28  # one partition's bar
# Streamlit fits the whole chart (title, axis, legend) into its height: this much besides the bars
CHART_PAD_PX = 110


def _amount(value: float, resource: str) -> str:
    return f"{value:,.1f}" if resource == "Memory GB" else f"{value:,.0f}"


def usage_rows(util: dict[str, Any]) -> list[dict[str, Any]]:
    """Long rows (partition, bar label, resource, use, amount, order) for stacked bars of allocated,
    idle and down; the bar's label says ``gpu · 6 of 12 allocated``."""
    rows = []
    for name, p in util.items():
        for resource, total, alloc, idle, scale in (("CPUs", p.total_cpus, p.alloc_cpus, p.idle_cpus, 1),
                                                    ("GPUs", p.total_gpus, p.alloc_gpus, p.idle_gpus, 1),
                                                    ("Memory GB", p.total_memory_mb, p.alloc_memory_mb,
                                                     p.idle_memory_mb, 1024)):
            down = max(total - alloc - idle, 0)
            label = f"{name} · {_amount(alloc / scale, resource)} of {_amount(total / scale, resource)} allocated"
            for order, (use, amount) in enumerate(zip(USES, (alloc, idle, down))):
                rows.append({"partition": name, "bar": label, "resource": resource, "use": use, "order": order,
                             "amount": round(amount / scale, 1)})
    return rows


def usage_chart(rows: list[dict[str, Any]], resource: str) -> alt.Chart:
    """Horizontal stacked bars, one per partition, at a height that shows every bar and the legend."""
    df = pd.DataFrame([r for r in rows if r["resource"] == resource])
    partitions = int(df["partition"].nunique())
    return alt.Chart(df, title=alt.Title(resource, anchor="start", fontSize=15)).mark_bar(size=BAR_PX).encode(
        x=alt.X("sum(amount):Q", title=None, axis=alt.Axis(tickMinStep=1, labelFontSize=12)),
        y=alt.Y("bar:N", title=None, sort=None, axis=alt.Axis(labelFontSize=13, labelLimit=320)),
        color=alt.Color("use:N", scale=alt.Scale(domain=list(USES), range=list(USE_COLOURS)),
                        legend=alt.Legend(title=None, orient="bottom", direction="horizontal", labelFontSize=12)),
        order=alt.Order("order:Q"),
        tooltip=["partition", "use", alt.Tooltip("amount:Q", title=resource)],
    ).properties(height=CHART_PAD_PX + (BAR_PX + 16) * partitions)


def utilisation_section(settings: Settings, executors: Any) -> None:
    from schedulers.launch import utilisation_for

    st.subheader(f"Partitions and nodes ({settings.scheduler})")
    with st.spinner("Asking the scheduler…"):
        try:
            util = utilisation_for(settings.scheduler, executors)
        except (SchedulerError, FlowTrainError) as err:
            st.error(f"Cannot read the cluster's state: {err}")
            return
    if not util:
        st.warning("The scheduler reported no partitions.")
        return
    rows = usage_rows(util)
    cols = st.columns(len(RESOURCES))
    for col, resource in zip(cols, RESOURCES, strict=True):
        if not any(r["amount"] for r in rows if r["resource"] == resource):
            col.markdown(f"**{resource}**")
            col.info(f"No {resource} on {'this machine' if settings.scheduler == 'local' else 'this cluster'}.")
            continue
        col.altair_chart(usage_chart(rows, resource), width="stretch")
    parts = [{"partition": n, "up": p.up, "default": p.default, "nodes available": f"{p.available_nodes}/{len(p.nodes)}",
              "idle CPUs": f"{p.idle_cpus}/{p.total_cpus}", "idle GPUs": f"{p.idle_gpus}/{p.total_gpus}",
              "running jobs": p.running_jobs, "pending jobs": p.pending_jobs} for n, p in util.items()]
    st.dataframe(pd.DataFrame(parts), hide_index=True)
    nodes: dict[str, dict[str, Any]] = {}
    for pname, p in util.items():
        for n in p.nodes:
            row = nodes.setdefault(n.name, {"node": n.name, "partitions": [], "state": n.state,
                                            "CPUs used": f"{n.alloc_cpus}/{n.cpus}", "GPUs used": f"{n.alloc_gpus}/{n.gpus}",
                                            "memory used GB": f"{n.alloc_memory_mb / 1024:.1f}/{n.memory_mb / 1024:.1f}",
                                            "reason": n.reason})
            row["partitions"].append(pname)
    with st.expander(f"Nodes ({len(nodes)})", expanded=len(nodes) <= 8):
        st.dataframe(pd.DataFrame([{**r, "partitions": ", ".join(r["partitions"])} for r in nodes.values()]),
                     hide_index=True)


def _discover(settings: Settings, refresh: bool) -> Any:
    from schedulers.discovery import discover

    return discover(settings.environments, refresh=refresh)


def frameworks_section(settings: Settings, user: str) -> list[Any] | None:
    st.subheader("Installed frameworks per environment")
    refresh = st.button("Probe again", key="cluster.refresh", help="Ignore the cached answers and probe now.")
    with st.status("Finding the installed frameworks…", expanded=False) as status:
        try:
            # A fresh probe starts every environment's interpreter: one at a time per user.
            with limits.GATE.hold("probe", user) if refresh else contextlib.nullcontext():
                reports = _discover(settings, refresh)
        except (FlowTrainError, SchedulerError) as err:
            status.update(label="Discovery failed", state="error")
            st.error(str(err))
            return None
        status.update(label=f"{len(reports)} environment(s)", state="complete")
    rows = []
    for rep in reports:
        env = rep.environment
        for fw in FRAMEWORKS:
            info = rep.frameworks.get(fw)
            rows.append({"environment": env.name, "partitions": ", ".join(env.partitions) or "all",
                         "framework": fw, "installed": bool(info and info.installed),
                         "version": (info.version if info else None) or "–", "build": info.build if info else "-",
                         "checked": time.strftime("%H:%M:%S", time.localtime(rep.probed_at)) if rep.probed_at else "–",
                         "note": (info.error if info and not info.installed else "") or "; ".join(rep.errors)})
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    return reports


def selector_section(ed: Editor, settings: Settings, executors: Any, reports: list[Any] | None, user: str) -> None:
    from schedulers.estimate import span_words
    from schedulers.launch import plan
    from schedulers.selector import duration_words

    st.subheader("Framework for the current pipeline")
    try:
        spec = ed.valid_spec()
    except SpecError as err:
        st.info(f"The pipeline has {len(err.problems)} problem(s); fix them on the Editor page to see the choice.")
        return
    if reports is None:
        st.warning("No discovery result: the selector cannot choose.")
        return
    with st.spinner("Choosing…"):
        try:
            sel = plan(spec, scheduler=settings.scheduler, executors=executors, settings=settings,
                       reports=reports, calibrate=False, user=user)  # a page view never starts calibration jobs
        except (FlowTrainError, SchedulerError) as err:
            st.error(str(err))
            return
    if sel.ok:
        st.success(f"**{sel.framework}** on partition **{sel.partition}** (environment {sel.environment}) — "
                   + sel.reasons[0])
    else:
        st.error(sel.reasons[0] if sel.reasons else "nothing can run this pipeline")
    st.markdown("\n".join(f"- {r.strip().lstrip('- ')}" for r in sel.reasons[1:]))
    st.dataframe(pd.DataFrame([{
        "rank": c.rank or "–", "framework": c.framework, "partition": c.partition, "feasible": c.feasible,
        "installed": c.installed, "version": c.version or "–", "build": c.build, "all ops supported": c.supported,
        "starts now": c.can_start_now, "idle GPUs": c.idle_gpus, "idle CPUs": c.idle_cpus,
        "pending": c.pending_jobs, "samples/s": round(c.samples_per_s) if c.samples_per_s else None,
        "speed from": {"measured": "calibration job", "model": "MACs model"}.get(c.speed_source, "–"),
        "expected wait": duration_words(c.wait_s) if c.wait_s is not None else ("unknown" if c.finish_s else "–"),
        "time to result": duration_words(c.finish_s) if c.finish_s is not None else "–",
        "could be": span_words(c.low_s, c.high_s) if c.low_s is not None and c.high_s is not None else "–",
        **{name: duration_words((c.estimate or {}).get(part) or 0).lstrip("~") if c.estimate else "–"
           for name, part in (("start-up", "startup_s"), ("training", "train_s"), ("validation", "val_s"))},
        "why": c.reason} for c in sel.candidates]), hide_index=True)
    st.caption("Time to result = wait + start-up + training + validation + checkpoints and the end of the run. "
               "Speeds come from calibration jobs of this pipeline (`python -m flowtrain calibrate SPEC`) or "
               "completed runs, else from the MACs model learned from your other pipelines' measurements; "
               "*could be* is the estimate's uncertainty. On this machine, a measurement's training, validation "
               "and start-up are scaled by the load now against the load it was measured under (*why* says by "
               "how much). See docs/selector.md.")


def page(ed: Editor, settings: Settings, user: str) -> None:
    st.title("Cluster")
    executors = executors_for(str(settings.home))
    utilisation_section(settings, executors)
    reports = frameworks_section(settings, user)
    selector_section(ed, settings, executors, reports, user)
