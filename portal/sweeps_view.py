"""The Runs page's sweeps: one sweep's points as a table sorted by its metric with the best one marked,
a chart of the metric against each swept value, and one button that cancels the whole sweep.

Sweeps are submitted with ``python -m flowtrain sweep`` (docs/sweeps.md); each point is also an ordinary
run in the page's run list. Everything is asked of the registry with the signed-in user.
"""

from __future__ import annotations

import math
import time
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from core.errors import FlowTrainError
from schedulers.base import SchedulerError
from schedulers.registry.runs import RunRegistry
from schedulers.registry.sweeps import Sweep
from schedulers.sweeps import PointRow, cancel_sweep, ranked_points, sweep_counts

MAX_LISTED = 50


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _cancel(registry: RunRegistry, executors: Any, sweep_id: str, user: str) -> None:
    try:
        cancel_sweep(registry, sweep_id, executors, user)
        st.session_state["runs.notice"] = ("info", f"Cancel requested for every point of sweep {sweep_id}.")
    except (FlowTrainError, SchedulerError) as err:
        st.session_state["runs.notice"] = ("error", f"Could not cancel sweep {sweep_id}: {err}")


def _shown(value: Any) -> Any:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def points_frame(sweep: Sweep, rows: list[PointRow]) -> pd.DataFrame:
    """The table: best mark, point, each swept value, state, the metric, run id (best first)."""
    return pd.DataFrame([{"best": "★" if r.best else "", "point": r.point,
                          **{path: _shown(r.values[path]) for path in sweep.paths},
                          "state": r.run.state.value, sweep.metric: r.score, "run": r.run.id} for r in rows])


def _chart(sweep: Sweep, rows: list[PointRow], path: str) -> alt.Chart | None:
    """The metric against one swept value (log axis for positive values spanning 100× or more)."""
    data = [{"value": _shown(r.values[path]), sweep.metric: r.score, "point": r.point,
             "best": "best" if r.best else "other"} for r in rows if r.score is not None]
    if not data:
        return None
    values = [d["value"] for d in data]
    numeric = all(isinstance(v, (int, float)) for v in values)
    scale = alt.Scale(type="log") if numeric and min(values) > 0 and max(values) / min(values) >= 100 \
        else alt.Scale(zero=False)
    x = alt.X("value:Q", title=path, scale=scale) if numeric else alt.X("value:N", title=path)
    return alt.Chart(pd.DataFrame(data)).mark_point(filled=True, size=90).encode(
        x=x, y=alt.Y(f"{sweep.metric}:Q", title=sweep.metric, scale=alt.Scale(zero=False)),
        color=alt.Color("best:N", title=None, scale=alt.Scale(domain=["best", "other"], range=["#d62728", "#1f77b4"])),
        tooltip=["point", "value", sweep.metric],
    ).properties(height=240, title=f"{sweep.metric} vs {path}")


def sweeps_section(registry: RunRegistry, executors: Any, user: str) -> None:
    sweeps = registry.list_sweeps(user, limit=MAX_LISTED)
    if not sweeps:
        return
    st.subheader(f"Your sweeps ({len(sweeps)})")
    by_id = {s.id: s for s in sweeps}
    if st.session_state.get("sweeps.selected") not in by_id:
        st.session_state["sweeps.selected"] = sweeps[0].id
    sweep_id = st.selectbox("Sweep", list(by_id), key="sweeps.selected",
                            format_func=lambda i: f"{by_id[i].name} · {_when(by_id[i].created)} · {i}")
    sweep = by_id[sweep_id]
    rows = ranked_points(registry, sweep)
    states = ", ".join(f"{n} {state}" for state, n in sweep_counts([r.run for r in rows]).items())
    group = "job array" if sweep.scheduler == "slurm" else "local group"
    st.caption(f"{len(rows)} points of {sweep.name} · {sweep.framework} on {sweep.scheduler}, {group} "
               f"{sweep.job_id or '–'}, at most {sweep.parallelism} at once · ranked by {sweep.metric} "
               f"({'higher' if sweep.goal == 'max' else 'lower'} is better) · {states}")
    best = next((r for r in rows if r.best), None)
    if best is not None and best.score is not None and math.isfinite(best.score):
        values = ", ".join(f"{p} = {best.values[p]}" for p in sweep.paths)
        st.success(f"Best: point {best.point} ({values}): {sweep.metric} {best.score:.4g} · run {best.run.id}",
                   icon=":material/trophy:")
    st.dataframe(points_frame(sweep, rows), hide_index=True, width="stretch")
    charts = [c for c in (_chart(sweep, rows, path) for path in sweep.paths) if c is not None]
    if charts:
        for col, chart in zip(st.columns(len(charts)), charts, strict=True):
            col.altair_chart(chart, width="stretch")
    else:
        st.caption(f"The charts of {sweep.metric} against each swept value appear as points complete.")
    st.button("Cancel sweep", key="sweeps.cancel", disabled=all(r.run.is_final for r in rows), on_click=_cancel,
              args=(registry, executors, sweep.id, user), help="Stops every point that has not ended: one cancel of "
              "the whole job array.")
