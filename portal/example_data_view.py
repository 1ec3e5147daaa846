"""The editor's "Generate example data": a template that needs data becomes runnable in the portal.

Offered next to the data layer's "Needs your data" when :mod:`core.example_data` can write data in
the layout the data layer names (ImageNet- and CIFAR-shaped image folders, the text templates'
CSV…). The button writes the default small size (a few hundred samples, at least one per class)
under the user's first writable data root, at the data layer's relative source, as
``python -m flowtrain example-data TEMPLATE --out ROOT`` would; then it points the data layer at the
resolved absolute path (:func:`settings.access.resolve_source`, the pinned-source rule) through the
editor's own source setter, which probes it, so the forms, the spec and the mark agree. What was
written, where and how much stays as a notice on the data layer. What FlowTrain wrote is recorded in
the user's own record under the FlowTrain home (:func:`core.example_data.record_path`), never in the
data folder; data that FlowTrain did not write (or that changed since) is never overwritten, and
nothing is written through a symbolic link (:func:`core.example_data.write_example_data` refuses).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import streamlit as st

from core.errors import FlowTrainError, SpecError
from core.example_data import example_target, record_path, write_example_data
from portal import limits
from portal.editor_state import Editor
from settings import Settings
from settings.access import confine, data_roots, resolve_source

TOPIC = "data.example"  # the notice saying what was written (or why not)
ROOTS_SETTING = "[data] roots (or [data.users.NAME] roots) in the settings file"

SetSource = Callable[[Editor, str, Settings, str], None]


def target(ed: Editor) -> PurePosixPath | None:
    """The relative path example data would be written at, or None when there is none to write."""
    try:
        relative, _fmt = example_target(ed.spec().data)
    except SpecError:
        return None
    return relative


def writable_root(user: str, settings: Settings) -> Path:
    """The user's first data root that is a folder the portal can write; FlowTrainError naming the
    setting (and why each root is not usable) otherwise."""
    roots = data_roots(user, settings)
    if not roots:
        raise FlowTrainError(f"no data roots are configured for you, so the example data has nowhere to go; "
                             f"add a folder you can write to {ROOTS_SETTING}")
    why = []
    for root in roots:
        if not root.is_dir():
            why.append(f"{root} does not exist")
        elif not os.access(root, os.W_OK | os.X_OK):
            why.append(f"{root} is not writable")
        else:
            return root
    raise FlowTrainError(f"none of your data roots can take the example data ({'; '.join(why)}); add a folder you "
                         f"can write to {ROOTS_SETTING}")


def generate(ed: Editor, settings: Settings, user: str, set_source: SetSource) -> bool:
    """Write example data for the data layer and point the source at it, or leave a notice saying why not."""
    root: Path | None = None
    try:
        spec = ed.spec()
        relative, _fmt = example_target(spec.data)
        root = writable_root(user, settings)
        confine(user, root / relative, settings)  # no symbolic link on the way leads out of the roots
        with limits.GATE.hold("example_data", user), st.spinner("Writing example data…"):
            written = write_example_data(spec, root, record=record_path(settings.home, user))
        source = resolve_source(user, str(written.path), settings)
    except SpecError as err:
        ed.notice("error", "Could not generate example data: " + "; ".join(
            str(p).replace("`", "'") for p in err.problems), "data", topic=TOPIC)
        return False
    except FlowTrainError as err:
        ed.notice("error", f"Could not generate example data: {err}", "data", topic=TOPIC)
        return False
    except OSError as err:
        ed.notice("error", f"Could not generate example data under {root}: {err.strerror or err}"
                           + (f" ({err.filename})" if err.filename else ""), "data", topic=TOPIC)
        return False
    set_source(ed, source, settings, user)
    ed.refresh_forms()  # the probe set format, size and classes
    kept = (f" Kept {len(written.kept):,} file(s) of the earlier example data that changed since (yours now): "
            + ", ".join(str(p) for p in written.kept[:5]) + (" …" if len(written.kept) > 5 else "") + "."
            ) if written.kept else ""
    ed.notice("success", f"Generated example data: {written.detail}, {written.amount}, in {source}. The data layer "
                         "reads it now. It is random noise around one colour (or a few words) per class: it shows "
                         "the pipeline running and the loss falling, not how well the model learns real data."
                         + kept, "data", topic=TOPIC)
    return True


def offer(ed: Editor, settings: Settings, user: str, set_source: SetSource) -> None:
    """The button under "Needs your data", when example data can be written for this data layer."""
    relative = target(ed)
    if relative is None:
        return
    try:
        where = str(writable_root(user, settings) / relative)
    except FlowTrainError:
        where = f"'{relative}' under your first writable data root (you have none)"
    st.button("Generate example data", key="editor.example_data", on_click=generate,
              args=(ed, settings, user, set_source), icon=":material/dataset:",
              help=f"Writes a few hundred small random samples in this layout to {where} (at least one per class; "
                   "seconds) and points the data layer at them, so the pipeline runs as shipped. Existing data "
                   "that FlowTrain did not write is never overwritten.")
