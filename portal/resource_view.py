"""The resource check beside "Valid" on the editor page (the checks themselves: :mod:`portal.resource_fit`).

What the scheduler offers is read through :mod:`schedulers.launch` as submit reads it (this machine's
CPUs, memory and GPUs for ``local``; the partitions and the user's accounts for Slurm), at most once a
minute: a busy controller costs seconds per call, not per rerun.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.errors import FlowTrainError
from portal.editor_state import Editor
from portal.resource_fit import ResourceCheck, check_local, check_slurm
from schedulers.base import SchedulerError
from schedulers.launch import Executors, accounting_for, utilisation_for
from settings import Settings

FIT_TOPIC = "training.fit"


@st.cache_data(ttl=60, show_spinner=False)
def _offer(home: str, scheduler: str) -> tuple[Any, Any, str]:
    """(partition utilisation, accounting, why not readable) for the scheduler, as submit reads them."""
    try:
        executors = Executors(home)
        util = utilisation_for(scheduler, executors)
    except (SchedulerError, FlowTrainError, OSError) as err:
        return None, None, str(err)
    try:
        accounting = accounting_for(executors) if scheduler == "slurm" else None
    except (SchedulerError, FlowTrainError, OSError) as err:  # the partitions are checked all the same
        return util, None, f"accounts and QoS not checked: {err}"
    return util, accounting, ""


def check(ed: Editor, settings: Settings) -> tuple[ResourceCheck | None, str]:
    """The training layer's resources checked against the user's scheduler, or why they cannot be."""
    util, accounting, why = _offer(str(settings.home), settings.scheduler)
    if util is None:
        return None, why
    training = ed.doc.get("training") or {}
    if settings.scheduler == "local":
        return check_local(training, util["local"]), why
    return check_slurm(training, util, accounting), why


def _fit(ed: Editor, fitted: dict[str, Any]) -> None:
    ed.set_field("training", ("resources",), fitted)
    ed.refresh_forms()  # the training layer's fields show the new values
    ed.notice("success", "The training layer now asks for what this machine has (undo brings the old values "
                         "back).", "training", topic=FIT_TOPIC)


def show(ed: Editor, result: ResourceCheck, facts: str) -> None:
    """"Valid, but …" with every resource that does not fit, and *Fit to this machine* when there is a fit."""
    lines = "\n".join(f"- {str(p).replace('`', chr(39))}" for p in result.problems)
    st.warning(f"Valid, but {result.where}: the training layer asks for more than that, so Submit would fail. "
               f"{len(result.problems)} resource problem(s):\n\n{lines}\n\nThe graph: {facts}.",
               icon=":material/memory:")
    if result.fitted is not None:
        st.button("Fit to this machine", key="editor.fit_resources", on_click=_fit, args=(ed, result.fitted),
                  type="primary", help="Sets nodes, GPUs, CPUs (and memory) of the training layer to what this "
                                       "machine has.")
