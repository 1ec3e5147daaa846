"""The editor's data layer: the data source (a built-in dataset or a file under the user's data roots,
probed for its format, size and sample shape), the loader's fields, and the preprocessing and augmentation
steps.

Drawing only: every edit goes through :class:`portal.editor_state.Editor`; the probe is portal/dataprobe.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

import streamlit as st

from core import datasets
from core.errors import FlowTrainError, Problem
from core.spec import Task
from portal import dataprobe, example_data_view, limits, users
from portal.data_steps import new_step, step_catalogue
from portal.editor_state import Editor
from portal.forms import STALE, field_input, shown_value, step_field_widget, wkey
from portal.notices_view import notices
from settings import Settings

PATH_TOPIC = "data.path"  # why a data path was refused
MAX_FILES_LISTED = 300


def _set_source(ed: Editor, source: str, settings: Settings, user: str) -> None:
    ed.set_field("data", ("source",), source)
    probe_source(ed, settings, user)


def probe_source(ed: Editor, settings: Settings, user: str) -> None:
    """Detect format, size and sample shape of the data source and record them in the data layer."""
    source = ed.doc["data"]["source"]
    try:
        with limits.GATE.hold("probe", user):
            dataprobe.check_path(source)  # before the file system sees it (ENAMETOOLONG)
            resolved = users.resolve_source(user, source, settings)
            result = dataprobe.probe(resolved, users.data_roots(user, settings),
                                     target=ed.doc["data"].get("target") or "label")
    except FlowTrainError as err:
        st.session_state["editor.probe"] = ("error", str(err))
        return
    if resolved != source:
        ed.set_field("data", ("source",), resolved)
    for key, value in result.to_spec_fields().items():
        ed.set_field("data", (key,), "auto" if key == "format" and value == "builtin" else value)
    # built-ins know their classes; a file's detected classes are recorded (the user may override them)
    # when the probe read every label: a count from the first rows is a lower bound, shown in the detail
    counted = result.num_classes if result.classes_exact else None
    ed.set_field("data", ("num_classes",), None if datasets.builtin(source) else counted)
    st.session_state["editor.probe"] = ("info", result.detail)


def _choose_builtin(ed: Editor, settings: Settings, user: str, key: str) -> None:
    source = shown_value(ed, key)
    if source is STALE or not source:
        return
    _set_source(ed, source, settings, user)
    ed.refresh_forms()  # the probe set format, size and classes


def _choose_file(ed: Editor, settings: Settings, user: str) -> None:
    root = st.session_state.get("data.root")
    rel = (st.session_state.get("data.path") or "").strip()
    if not root or not rel:
        ed.notice("error", "Choose a data root and a path inside it.", "data", topic=PATH_TOPIC)
        return
    try:
        path = users.confine(user, Path(root) / rel if not rel.startswith("/") else rel, settings)
    except FlowTrainError as err:
        ed.notice("error", f"Refused {rel!r}: {err}", "data", topic=PATH_TOPIC)
        return
    if not path.exists():
        ed.notice("error", f"{path} does not exist; check the path (it is relative to the chosen data root).", "data",
                  topic=PATH_TOPIC)
        return
    ed.clear_topic(PATH_TOPIC)
    with st.spinner("Detecting the format and size…"):
        _set_source(ed, str(path), settings, user)
    ed.refresh_forms()  # the probe set format, size and classes


def _list_files(root: Path) -> tuple[list[str], str | None]:
    """The data files and folders under ``root`` (three levels, hidden ones left out), and why the listing
    stopped early if a folder could not be read (the files read before it are kept)."""
    out: list[str] = []
    try:
        for path in sorted(root.rglob("*")):
            if len(out) >= MAX_FILES_LISTED:
                break
            rel = path.relative_to(root)
            if len(rel.parts) > 3 or any(p.startswith(".") for p in rel.parts):
                continue
            if path.is_dir() or path.suffix.lower() in (".csv", ".parquet", ".pq", ".npz"):
                out.append(str(rel) + ("/" if path.is_dir() else ""))
    except OSError as exc:
        return out, (f"Could not list everything under {root}: {exc.strerror or exc} ({exc.filename or root}). "
                     "Type the path below, or ask the portal's administrator to make the folder readable.")
    return out, None


def _add_step(ed: Editor, which: Literal["preprocessing", "augmentation"]) -> None:
    op = st.session_state.get(f"editor.add_{which}")
    if not op:
        return
    ed.set_list(which, [*(ed.doc["data"].get(which) or []), new_step(which, op)])
    ed.refresh_forms()


def _remove_step(ed: Editor, which: Literal["preprocessing", "augmentation"], index: int) -> None:
    steps = list(ed.doc["data"].get(which) or [])
    del steps[index]
    ed.set_list(which, steps)
    ed.refresh_forms()  # the later steps moved up one place


def _steps(ed: Editor, which: Literal["preprocessing", "augmentation"], title: str) -> None:
    catalogue = step_catalogue(which)
    st.markdown(f"**{title}**")
    steps = ed.doc["data"].get(which) or []
    if not steps:
        st.caption("none")
    for i, step in enumerate(steps):
        op = step.get("op")
        with st.container(border=True):
            head, rm = st.columns([5, 1], vertical_alignment="center")
            head.markdown(f"{i + 1}. `{op}`")
            rm.button("✕", key=f"editor.rm_{which}_{i}", on_click=_remove_step, args=(ed, which, i),
                      help="Remove this step")
            _doc, fields = catalogue.get(op, ("", []))
            for f in fields:
                step_field_widget(ed, which, i, step, f)
    a, b = st.columns([3, 1], vertical_alignment="bottom")
    a.selectbox(f"Add {'an' if which[0] in 'aeiou' else 'a'} {which} step", options=list(catalogue), index=None, key=f"editor.add_{which}",
                placeholder="choose a step…",
                format_func=lambda op: f"{op} — {catalogue[op][0].split('.')[0][:50]}" if catalogue[op][0] else op)
    b.button("Add", key=f"editor.add_{which}_btn", on_click=_add_step, args=(ed, which))


def needs_data(ed: Editor, need: Problem) -> None:
    """The data layer's mark when the pipeline names data this user does not have."""
    source = str(ed.doc["data"].get("source") or "").replace("`", "'")
    st.warning(f"**Needs your data.** This pipeline reads `{source}`: {need.message.removeprefix('needs your data: ')}. "
               f"Point the data layer at {need.expected}: {need.fix}.", icon=":material/folder_off:")


def data_layer(ed: Editor, settings: Settings, user: str, need: Problem | None = None) -> None:
    st.subheader("1 · Data layer", anchor="data-layer")
    notices(ed, "data")
    if need is not None:
        needs_data(ed, need)
        example_data_view.offer(ed, settings, user, _set_source)
    data = ed.doc["data"]
    source = data.get("source", "")
    roots = users.data_roots(user, settings)
    left, mid, right = st.columns([3, 3, 3])
    with left:
        modes = (["Built-in dataset"] if settings.builtin_datasets else []) + ["File under my data roots"]
        current = 0 if source.startswith("sklearn:") and settings.builtin_datasets else len(modes) - 1
        mode = st.radio("Source", modes, index=current, key=wkey(ed, "editor.source_mode"), horizontal=True)
        if mode == "Built-in dataset":
            names = list(datasets.BUILTIN)
            key = wkey(ed, "data.builtin")
            st.selectbox("Built-in dataset", names, index=names.index(source) if source in names else None,
                         key=key, on_change=_choose_builtin, args=(ed, settings, user, key),
                         placeholder="choose a dataset…",
                         format_func=lambda n: f"{n} — {datasets.BUILTIN[n].description}")
        else:
            if not roots:
                st.warning("No data roots are configured for you; ask the portal's administrator.")
            else:
                root = st.selectbox("Data root", [str(r) for r in roots], key="data.root")
                files, unreadable = _list_files(Path(root))
                if unreadable:
                    st.warning(unreadable)
                st.selectbox("Files and folders found", files, index=None, key="data.found",
                             placeholder=f"{len(files)} found" if files else "none found",
                             on_change=lambda: st.session_state.__setitem__(
                                 "data.path", (st.session_state.get("data.found") or "").rstrip("/")))
                st.text_input("Path inside the root", key="data.path", placeholder="e.g. tables/houses.csv")
                st.button("Use this data", key="editor.use_file", on_click=_choose_file, args=(ed, settings, user))
        st.caption(f"Current source: `{source}`")
        probe = st.session_state.get("editor.probe")
        if probe is None and source.startswith("sklearn:") and datasets.builtin(source):
            info = datasets.builtin(source)
            probe = ("info", f"format builtin ({info.kind}), {info.size:,} samples, sample shape "
                             f"{'×'.join(map(str, info.sample_shape))}, {info.num_classes} classes")
        if probe:
            {"info": st.success, "warning": st.warning, "error": st.error}[probe[0]](f"Detected: {probe[1]}"
                                                                                     if probe[0] == "info" else probe[1])
    with mid:
        a, b = st.columns(2)
        with a:
            field_input(ed, "data", ("batch_size",), "Batch size", min_value=1, max_value=1_048_576)
            field_input(ed, "data", ("validation_split",), "Validation split", kind="float", min_value=0.0,
                        max_value=0.99, step=0.05)
            field_input(ed, "data", ("task",), "Task", kind="select", options=list(get_args(Task)))
            field_input(ed, "data", ("target",), "Target column / key", kind="str")
        with b:
            field_input(ed, "data", ("num_workers",), "Loader workers", min_value=0, max_value=256)
            field_input(ed, "data", ("test_split",), "Test split", kind="float", min_value=0.0, max_value=0.99,
                        step=0.05)
            field_input(ed, "data", ("num_classes",), "Classes (0 = detect)", kind="optional_int")
            field_input(ed, "data", ("input_shape",), "Model input shape (empty = from data)", kind="ints")
        if data.get("task") == "language_modeling":  # a token stream read in windows (core/token_stream.py)
            c, d = st.columns(2)
            field_input(ed, "data", ("block_size",), "Block size (tokens read at once)", kind="optional_int",
                        container=c)
            field_input(ed, "data", ("vocab_size",), "Vocabulary size (256 for text bytes)", kind="optional_int",
                        container=d)
        field_input(ed, "data", ("shuffle",), "Shuffle every epoch", kind="bool")
        if data.get("task") == "segmentation":  # segmentation's own fields (docs/segmentation.md)
            c, d = st.columns(2)
            field_input(ed, "data", ("mask_folder",), "Mask folder (beside images/)", kind="str", container=c)
            field_input(ed, "data", ("ignore_index",), "Ignore index (0 = none)", kind="optional_int", container=d,
                        max_value=65_535)
        if data.get("size"):
            st.caption(f"Detected size: {data['size']:,} samples; sample shape "
                       f"{'×'.join(map(str, data.get('sample_shape') or [])) or 'unknown'}")
    with right:
        _steps(ed, "preprocessing", "Preprocessing")
        _steps(ed, "augmentation", "Augmentation")
