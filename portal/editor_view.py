"""The editor page: its toolbar and its graph and training layers; the data layer is portal/data_view.py.

Drawing only: every edit goes through :class:`portal.editor_state.Editor`, which is unit-tested.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core import datasets, zoo
from core.errors import FlowTrainError, Problem
from core.frameworks import FRAMEWORKS
from core.load import MAX_SPEC_BYTES, spec_from_json
from core.ops import REGISTRY
from portal import (
    blocks_view,
    canvas,
    data_needs,
    data_view,
    drafts_view,
    graph_fragment,
    limits,
    onnx_upload,
    resource_view,
    start_weights,
    users,
)
from portal.editor_blocks import bound_to, is_port, use_params
from portal.editor_state import Editor
from portal.forms import PARAM_PREFIX, STALE, field_input, param_widget, shown_value, wkey
from portal.graph_fragment import Slots
from portal.notices_view import notices
from portal.session import reset_widgets
from portal.spec_export import export_document, strip_problems
from schedulers.accounting import Accounting
from schedulers.base import SchedulerError
from schedulers.launch import Executors, accounting_for
from settings import Settings
from settings.access import pin_source

MAX_PROBLEMS_SHOWN = 25
DOCUMENT_TOPIC = "document"  # what replaced the pipeline: a template, an import (or why not)
FAMILY_TITLES = {"io": "Input / output", "conv": "Convolution", "pool": "Pooling", "dense": "Dense",
                 "activation": "Activation", "norm": "Normalisation", "dropout": "Dropout", "shape": "Shape",
                 "merge": "Merge", "recurrent": "Recurrent", "attention": "Attention", "embedding": "Embedding",
                 "tokens": "Tokens (vision transformers)", "resize": "Resize"}
FAMILY_ORDER = ["io", "conv", "pool", "dense", "activation", "norm", "dropout", "shape", "merge", "recurrent",
                "attention", "embedding", "tokens", "resize"]


def _after_replace(ed: Editor) -> None:
    """The document was replaced (its forms have a new version already): forget the editor's own
    state about the old one (the probe's last answer, a connection being chosen). The old forms'
    widgets are left alone: their keys have the old version, so Streamlit drops them after this
    run, and a callback of theirs still due in this run is ignored (forms.shown_value)."""
    reset_widgets("editor.")


def _forget_template_choice() -> None:
    """The picker shows no template once the pipeline is not the template any more (a new one, an import)."""
    reset_widgets("toolbar.template")


# --------------------------------------------------------------------------- toolbar


def _load_template(ed: Editor) -> None:
    name = st.session_state.get("toolbar.template")
    if not name:
        return
    ed.load_spec(zoo.template(name))
    ed.notice("success", f"Loaded the template {name}.", "toolbar", topic=DOCUMENT_TOPIC)
    _after_replace(ed)


def import_spec(ed: Editor, name: str, size: int, read: Callable[[], bytes], settings: Settings,
                user: str) -> bool:
    """Import an uploaded spec: at most :data:`~core.load.MAX_SPEC_BYTES`, parsed, and its data source
    resolved for ``user`` (:func:`settings.access.pin_source`), or a notice saying why not."""
    if size > MAX_SPEC_BYTES:
        ed.notice("error", f"Could not import {name}: it is {size / 2**20:.1f} MB; a pipeline spec may have at "
                           f"most {limits.MAX_UPLOAD_MB} MB.", "toolbar", topic=DOCUMENT_TOPIC)
        return False
    text, listed = strip_problems(read())  # a file exported while invalid lists its problems
    try:
        spec = pin_source(spec_from_json(text, source=name), user, settings)
    except FlowTrainError as err:
        ed.notice("error", f"Could not import {name}: {err}", "toolbar", topic=DOCUMENT_TOPIC)
        return False
    ed.load_spec(spec)
    ed.notice("success", f"Imported {name}." + (f" (It was exported with {listed} problem(s); the editor checks it "
                                                 "again below.)" if listed else ""), "toolbar", topic=DOCUMENT_TOPIC)
    return True


def _import(ed: Editor, key: str, settings: Settings, user: str) -> None:
    upload = st.session_state.get(key)
    if upload is None:
        return
    ed.imports += 1  # the next import gets an empty uploader: the same file again is a new import
    if import_spec(ed, upload.name, upload.size, upload.getvalue, settings, user):
        _after_replace(ed)
        _forget_template_choice()


def _undo(ed: Editor) -> None:
    if ed.undo():
        _after_replace(ed)


def _redo(ed: Editor) -> None:
    if ed.redo():
        _after_replace(ed)


def _new(ed: Editor) -> None:
    ed.replace_doc(Editor.blank_doc())
    _after_replace(ed)
    _forget_template_choice()


EXPORT_KEY = "editor.export"  # the export of the document as it was last written (reset with the other editor.*)


def _export(ed: Editor) -> tuple[str, list[Problem]]:
    """:func:`export_document`, written again only when the document changed: a 500-node spec took a tenth of a
    second or more to write (indented JSON goes through Python's pure-Python encoder) on every run of the page."""
    problems = ed.problems()
    key = (id(ed.doc), ed.rev, tuple(str(p) for p in problems),
           tuple((n["id"], str(n.get("position"))) for n in ed.doc.get("nodes") or []))  # a drag: no new revision
    cached = st.session_state.get(EXPORT_KEY)
    if cached is None or cached[0] != key:
        cached = (key, *export_document(ed))
        st.session_state[EXPORT_KEY] = cached
    return cached[1], cached[2]


def toolbar(ed: Editor, settings: Settings, user: str) -> DeltaGenerator:
    """The toolbar; the place for its export button (:func:`export_button`, drawn by the graph layer's fragment:
    the file is the document as an edit there left it)."""
    c1, c2, c3, c4, c5 = st.columns([3, 3, 2, 1, 1], vertical_alignment="bottom")
    with c1:
        field_input(ed, "meta", ("name",), "Pipeline name", kind="str")
    with c2:
        summaries = {e.name: e.summary for e in zoo.entries()}
        st.selectbox("Template from the model zoo", options=list(summaries), index=None, key="toolbar.template",
                     placeholder="choose a template…", format_func=lambda n: f"{n} — {summaries[n]}",
                     help="Replaces the current pipeline (undo brings it back).")
    with c3:
        st.button("Load template", key="toolbar.load", on_click=_load_template, args=(ed,),
                  disabled=not st.session_state.get("toolbar.template"))
    with c4:
        st.button("↶ Undo", key="toolbar.undo", on_click=_undo, args=(ed,), disabled=not ed.history,
                  help="Undo the last change to the pipeline.")
    with c5:
        st.button("↷ Redo", key="toolbar.redo", on_click=_redo, args=(ed,), disabled=not ed.future,
                  help="Make again the change the last undo took back.")
    chosen = st.session_state.get("toolbar.template")
    if chosen:
        st.caption(template_note(chosen))
    c1, c2, c3 = st.columns([4, 3, 2], vertical_alignment="bottom")
    with c1:
        st.file_uploader("Import a spec (JSON)", type=["json"], key=ed.upload_key, on_change=_import,
                         args=(ed, ed.upload_key, settings, user), max_upload_size=limits.MAX_UPLOAD_MB)
    with c2:
        export = st.container()
    with c3:
        st.button("New pipeline", key="toolbar.new", on_click=_new, args=(ed,),
              help="A blank pipeline in this draft (undo brings this one back); 'New draft' keeps it as a draft.")
    onnx_upload.import_form(ed, settings, user)
    notices(ed, "toolbar")
    return export


def export_button(ed: Editor) -> None:
    """Export the document as it is now, valid or not (an invalid one with its problems at the top of the file)."""
    text, problems = _export(ed)
    st.download_button("Export spec (JSON)", data=text, file_name=f"{ed.doc.get('name') or 'pipeline'}.json",
                       mime="application/json", key="toolbar.export", on_click="ignore",
                       help=f"Exported with its {len(problems)} problem(s) listed at the top of the file "
                            "(they are under the graph too)." if problems else
                       "The spec, as the command line reads it.")


def template_note(name: str) -> str:
    """A template's description and whether it runs as shipped (built-in data) or needs the user's data."""
    entry = next(e for e in zoo.entries() if e.name == name)
    data = zoo.template(name).data
    if datasets.builtin(data.source):
        where = f"runs as shipped on the built-in {data.source}"
    else:
        where = (f"needs your data: {data_needs.wanted(data.model_dump(mode='json'))} (it names "
                 f"'{data.source}')")
    return f"**{name}**: {entry.summary}; {where}."


GUIDE = """\
1. **Start** from a template (the picker below) (those on built-in data run as shipped; the others say what data
   they need, and can generate small example data) or from the blank pipeline (an Input and an Output).
2. **Data layer**: a built-in dataset, or a file or folder under your data roots (*File under my
   data roots*); its format, size and sample shape are detected.
3. **Graph layer**: add layers from the palette on the left, then drag from a node's bottom handle
   to another node's top handle to connect them. Click a node to edit it in the form on the right,
   where **Delete node** deletes it and ✕ beside an input removes that connection.
   Every node shows its output shape; a problem marks the node red and is listed under the canvas.
   A composite block (▣, e.g. a ResNet basic block) is one node: **Open block** edits it, and so
   every use of it; **← Back to pipeline** returns.
4. **Training layer**: epochs, loss, optimizer, schedule, and the nodes and GPUs to run on.
5. When the line under the canvas says **Valid**, submit it on the **Runs** page; the **Code** page
   shows the programs FlowTrain generates for PyTorch, Keras and PaddlePaddle.
"""


def first_run_guide(ed: Editor) -> None:
    """Open while the session still has its first, blank pipeline; one click away afterwards."""
    with st.expander("New here? How the editor works", expanded=not ed.history and ed.rev == 0,
                     icon=":material/help:"):
        st.markdown(GUIDE)


# --------------------------------------------------------------------------- graph layer


def _add(ed: Editor, op: str) -> None:
    ed.add_node(op)


def palette(ed: Editor) -> None:
    st.markdown("**Palette**")
    families = REGISTRY.families()
    order = [f for f in FAMILY_ORDER if f in families] + [f for f in families if f not in FAMILY_ORDER]
    for fam in order:
        with st.expander(FAMILY_TITLES.get(fam, fam.title()), expanded=fam in ("io", "conv", "pool", "dense",
                                                                                "activation", "shape")):
            for op in families[fam]:
                st.button(op, key=f"palette.{op}", on_click=_add, args=(ed, op), help=REGISTRY.get(op).help,
                          width="stretch")
    blocks_view.palette_blocks(ed, _add)


def _select(ed: Editor, key: str) -> None:
    ed.selected = st.session_state.get(key)


def _delete(ed: Editor, node_id: str) -> None:
    ed.delete_node(node_id)
    reset_widgets(f"{PARAM_PREFIX}{node_id}.")


def _connect_from(ed: Editor, node_id: str) -> None:
    source = st.session_state.get("editor.connect_from")
    if source:
        ed.connect(source, node_id)


def _set_label(ed: Editor, node_id: str, key: str) -> None:
    label = shown_value(ed, key)
    if label is not STALE and ed.has_node(node_id):
        ed.set_label(node_id, str(label).strip())


def side_form(ed: Editor) -> None:
    ids = [n["id"] for n in ed.nodes]
    if ed.selected not in ids:
        ed.selected = None
    key = wkey(ed, f"editor.selected.{ed.selected}")  # a new widget whenever the canvas changes the selection
    st.selectbox("Selected node", ids, index=ids.index(ed.selected) if ed.selected in ids else None,
                 key=key, on_change=_select, args=(ed, key), placeholder="click a node…")
    if ed.selected is None:
        st.caption("Click a node on the canvas (or choose it above) to edit its parameters. Connect nodes by "
                   "dragging from the bottom handle of one to the top handle of another. To delete a node, select "
                   "it and press **Delete node** at the end of this form; to remove a connection, press ✕ beside "
                   "it under **Inputs** of the node it feeds.")
        return
    node_id = ed.selected
    node = ed.node(node_id)
    op = node["data"].get("op")
    block = ed.block(op)
    if is_port(node):
        blocks_view.port_form(ed, node_id)
        return
    if op not in REGISTRY and block is None:
        st.error(f"{node_id} has no known layer type ({op!r}); delete it.")
        st.button("Delete node", key="editor.delete", on_click=_delete, args=(ed, node_id), type="primary")
        return
    if block is None:
        cls = REGISTRY.get(op)
        declared, max_inputs = list(cls.params), cls.max_inputs
        st.markdown(f"**{op}** · `{node_id}`")
        st.caption(cls.help)
    else:
        declared, max_inputs = use_params(block), len(block["inputs"])
        blocks_view.use_header(ed, node_id, block)
    analysis = ed.analysis()
    key = ed.info_key(node_id) or ""
    info = (analysis.uses.get(key) or analysis.nodes.get(key)) if analysis else None
    if info is not None:
        st.markdown(f"Output **{info.output}** · {info.n_params:,} parameters · {info.macs:,} MACs")
    for p in ed.graph_problems().get(node_id, []):
        st.error(_problem_text(p))
    key = wkey(ed, f"editor.label.{node_id}")
    st.text_input("Label", value=node["data"].get("label") or "", key=key, on_change=_set_label,
                  args=(ed, node_id, key))
    params = node["data"].get("params") or {}
    for prm in declared:
        value = params.get(prm.name, None if prm.required else prm.default)
        if bound_to(value) is not None:
            blocks_view.bound_param(ed, node_id, prm, value)
        else:
            param_widget(ed, node_id, prm, value)
    if block is not None:
        blocks_view.text_params(ed, node_id, block)
    if ed.open_block_name:
        blocks_view.inner_node_extras(ed, node_id, declared)
    sources = ed.incoming(node_id)
    if max_inputs != 0:
        multi = ed.multi_input(op)
        st.markdown("**Inputs**" + (" (port order)" if multi else ""))
        for i, src in enumerate(sources):
            c = st.columns([3, 2, 2, 2] if multi else [5, 2], vertical_alignment="center")
            c[0].markdown(f"{i}: `{src}`" if multi else f"`{src}`")
            if multi:
                c[1].button("↑", key=f"editor.up.{node_id}.{src}", on_click=ed.move_port, args=(node_id, src, -1),
                            disabled=i == 0, help="Earlier port")
                c[2].button("↓", key=f"editor.down.{node_id}.{src}", on_click=ed.move_port,
                            args=(node_id, src, 1), disabled=i == len(sources) - 1, help="Later port")
            c[-1].button("✕", key=f"editor.cut.{node_id}.{src}", on_click=ed.disconnect, args=(src, node_id),
                         help="Remove this connection")
        others = [i for i in ids if i != node_id and i not in sources]
        a, b = st.columns([3, 2], vertical_alignment="bottom")
        a.selectbox("Connect from", others, index=None, key="editor.connect_from", placeholder="choose a node…")
        b.button("Connect", key="editor.connect", on_click=_connect_from, args=(ed, node_id))
    st.button("Delete node", key="editor.delete", on_click=_delete, args=(ed, node_id))


def _layout(ed: Editor) -> None:
    ed.layout()


def validation(ed: Editor, need: Problem | None = None, settings: Settings | None = None) -> None:
    """"Valid" means runnable where it will run: the graph checks out, the data layer names data the user
    has, and the training layer's resources fit the scheduler the user submits to."""
    problems = ed.problems()
    analysis = ed.analysis()
    if not problems and analysis is not None:
        facts = (f"{len(analysis.nodes)} nodes · {analysis.total_params:,} parameters · {analysis.total_macs:,} MACs "
                 f"per sample · output {analysis.nodes[analysis.output_id].output}" if analysis.output_id else "")
        if need is not None:
            st.warning(f"Not runnable yet: the data layer needs your data (see [the data layer](#data-layer)). "
                       f"The graph is valid: {facts}.", icon=":material/folder_off:")
            return
        fit, why = resource_view.check(ed, settings) if settings is not None else (None, "")
        if fit is not None and not fit.fits:
            resource_view.show(ed, fit, facts)
            if why:
                st.caption(why)
            return
        st.success((f"Valid: {facts}" if facts else "Valid.") + (f" Fits {fit.where.replace(' has ', ', which has ')}."
                                                                 if fit is not None else ""))
        if why:
            st.caption(why if fit is not None else f"Resources not checked against "
                       f"{settings.scheduler if settings else 'the scheduler'}: {why}")
        return
    lines = [f"- {_problem_text(p)}" for p in problems[:MAX_PROBLEMS_SHOWN]]
    if len(problems) > MAX_PROBLEMS_SHOWN:
        lines.append(f"- … and {len(problems) - MAX_PROBLEMS_SHOWN} more")
    st.error(f"**{len(problems)} problem(s)** — invalid nodes are marked red on the canvas.\n\n" + "\n".join(lines))


def _problem_text(p: Problem) -> str:
    text = str(p)
    return text.replace("`", "'")


def graph_layer(ed: Editor, need: Problem | None = None, settings: Settings | None = None) -> None:
    st.subheader("2 · Graph layer", anchor="graph-layer")
    left, mid, right = st.columns([1.3, 5, 2.2])
    with left:
        palette(ed)
    with right:
        side_form(ed)
    with mid:  # the canvas in a container of its own, made before what is drawn above it (see page())
        controls, drawing, below = st.container(), st.container(), st.container()
    with controls:
        a, b, c = st.columns([2, 2, 5], vertical_alignment="center")
        a.button("Auto-layout", key="editor.layout", on_click=_layout, args=(ed,),
                 help="Arrange the nodes top to bottom in layers.")
        b.caption(f"{len(ed.nodes)} nodes · {len(ed.edges)} edges")
        blocks_view.block_bar(ed)
        blocks_view.make_block_form(ed)
        notices(ed, "graph")
    with drawing:
        canvas.fragment(ed, graph_fragment.FRAGMENT_KEY)  # a drag reruns only the canvas, a click the graph layer
    with below:
        validation(ed, need, settings)
        start_weights.ask_to_drop(ed)


@st.fragment(key=graph_fragment.FRAGMENT_KEY)
def graph_part(ed: Editor, need: Problem | None, settings: Settings, user: str, slots: Slots) -> None:
    """The graph layer as a fragment: an edit made in it (the palette, the side form, the canvas' controls) reruns
    it alone, not the page, unless it changed what the page shows outside it (portal/graph_fragment.py); it
    also draws the toolbar's export and the drafts bar's "Saved" line, which change with every edit."""
    alone = graph_fragment.running_alone()
    if alone:
        canvas.read_event(ed)
        drafts_view.autosave(ed, settings, user)  # app.py saves after a run of the page, not after a fragment's
        if graph_fragment.outside_changed(ed, need):
            st.rerun()
    with slots.export:
        export_button(ed)
    if slots.saved is not None:
        with slots.saved:
            drafts_view.save_status()
    graph_layer(ed, need, settings)
    if alone:
        canvas.mark_page(ed)  # what the canvas' fragment alone compares with


# --------------------------------------------------------------------------- training layer


@st.cache_data(ttl=120, show_spinner=False)
def slurm_accounts(home: str) -> tuple[Accounting | None, str]:
    """The submitting Slurm user's associations (``sacctmgr show assoc``), or why they cannot be read;
    asked at most every 2 min (an unreachable controller costs seconds per call, not per rerun)."""
    try:
        return accounting_for(Executors(home)), ""
    except SchedulerError as err:
        return None, str(err)


def account_fields(ed: Editor, settings: Settings) -> None:
    """Account and QoS: on a Slurm cluster with accounting, the user's own to choose from; else text."""
    acct = None
    if settings.scheduler == "slurm":
        acct, why = slurm_accounts(str(settings.home))
        if why:
            st.caption(f"Accounts unavailable: {why}")
    if acct is None:
        field_input(ed, "training", ("resources", "account"), "Slurm account (empty = default)", kind="optional_str")
        field_input(ed, "training", ("resources", "qos"), "QoS (empty = default)", kind="optional_str")
        return
    chosen = ed.doc["training"].get("resources", {}).get("account") or acct.default_account or ""
    field_input(ed, "training", ("resources", "account"), "Slurm account", kind="select", options=[None, *acct.accounts],
                help=f"None: your default account ({acct.default_account or 'none'}). From sacctmgr show assoc.")
    field_input(ed, "training", ("resources", "qos"), "QoS", kind="select", options=[None, *acct.qos_of(chosen)],
                help=f"QoS that account {chosen} allows you; None: its default.")


def training_layer(ed: Editor, settings: Settings) -> None:
    st.subheader("3 · Training layer", anchor="training-layer")
    notices(ed, "training")
    start_weights.status(ed)
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        st.markdown("**Compute**")
        field_input(ed, "training", ("resources", "nodes"), "Nodes", min_value=1, max_value=4096)
        field_input(ed, "training", ("resources", "gpus_per_node"), "GPUs per node", min_value=0, max_value=64)
        field_input(ed, "training", ("resources", "cpus_per_task"), "CPUs per task", min_value=1, max_value=1024)
        field_input(ed, "training", ("resources", "mem_gb"), "Memory GB (empty = default)", kind="optional_float")
        field_input(ed, "training", ("resources", "time_limit_min"), "Time limit (minutes)", min_value=1,
                    max_value=525_600)
        field_input(ed, "training", ("resources", "partition"), "Partition (empty = choose)", kind="optional_str")
        account_fields(ed, settings)
    with c2:
        st.markdown("**Loop**")
        field_input(ed, "training", ("framework",), "Framework", kind="select",
                    options=["auto", *FRAMEWORKS],
                    help="auto: the selector chooses from what is installed and free (Cluster page).")
        field_input(ed, "training", ("epochs",), "Epochs", min_value=1, max_value=100_000)
        field_input(ed, "training", ("samples_per_epoch",), "Samples per epoch (0 = all)", kind="optional_int")
        field_input(ed, "training", ("precision",), "Precision", kind="select", options=["auto", "fp32", "bf16"])
        field_input(ed, "training", ("seed",), "Seed", min_value=0)
        field_input(ed, "training", ("log_every_steps",), "Log every N steps", min_value=1)
    with c3:
        st.markdown("**Loss and optimizer**")
        field_input(ed, "training", ("loss",), "Loss", kind="select",
                    options=["cross_entropy", "mse", "mae", "bce_with_logits", "cross_entropy_dice"])
        field_input(ed, "training", ("label_smoothing",), "Label smoothing", kind="float", min_value=0.0,
                    max_value=0.99, step=0.05)
        field_input(ed, "training", ("optimizer", "name"), "Optimizer", kind="select", options=["sgd", "adam", "adamw"])
        field_input(ed, "training", ("optimizer", "lr"), "Learning rate", kind="float", min_value=1e-12, max_value=10.0)
        field_input(ed, "training", ("optimizer", "weight_decay"), "Weight decay", kind="float", min_value=0.0,
                    max_value=1.0)
        field_input(ed, "training", ("optimizer", "momentum"), "Momentum (SGD)", kind="float", min_value=0.0,
                    max_value=0.999)
    with c4:
        st.markdown("**Schedule and safety**")
        field_input(ed, "training", ("schedule", "name"), "LR schedule", kind="select",
                    options=["constant", "step", "cosine", "warmup_cosine", "plateau"])
        sched = ed.doc["training"].get("schedule", {}).get("name")
        if sched == "step":
            field_input(ed, "training", ("schedule", "step_size"), "Step size (epochs)", min_value=1)
            field_input(ed, "training", ("schedule", "gamma"), "Gamma", kind="float", min_value=1e-6, max_value=1.0)
        elif sched in ("cosine", "warmup_cosine"):
            if sched == "warmup_cosine":
                field_input(ed, "training", ("schedule", "warmup_epochs"), "Warm-up epochs", min_value=0)
            field_input(ed, "training", ("schedule", "min_lr"), "Minimum LR", kind="float", min_value=0.0)
        elif sched == "plateau":
            field_input(ed, "training", ("schedule", "patience"), "Patience (epochs)", min_value=0)
            field_input(ed, "training", ("schedule", "factor"), "Factor", kind="float", min_value=1e-6,
                        max_value=0.999)
        field_input(ed, "training", ("gradient_clip_norm",), "Clip gradient norm (empty = off)",
                    kind="optional_float")
        field_input(ed, "training", ("early_stopping", "patience"), "Early stopping patience (0 = off)",
                    kind="optional_int")
        field_input(ed, "training", ("checkpoint", "every_steps"), "Checkpoint every N steps (0 = per epoch only)",
                    kind="optional_int")


def page(ed: Editor, settings: Settings, user: str) -> None:
    """The whole editor page, in the patent's order: data, graph, training."""
    drafts_view.open_session(settings, user)  # app.py opened it (this covers a page run on its own)
    canvas.read_event(ed)
    drafts_view.autosave(ed, settings, user)  # the callbacks' and the canvas's edits of this run
    # The page's parts are containers made first, always in this order, so that what one part shows (a notice, a
    # caption, a form) never moves the next. Streamlit names the canvas' fragment after where it is drawn: had the
    # graph layer moved, the canvas in the browser would have sent its next value (a click) under the old name,
    # which Streamlit no longer knows, and nothing would have run (docs/streamlit-flow.md).
    head, data_part, graph_place, training_part = st.container(), st.container(), st.container(), st.container()
    with head:
        st.title("Pipeline editor")
        saved = drafts_view.drafts_bar(ed, settings, user)
        first_run_guide(ed)
        export = toolbar(ed, settings, user)
    need = data_needs.data_problem(ed.doc["data"], users.data_roots(user, settings), settings.builtin_datasets)
    with data_part:
        st.divider()
        data_view.data_layer(ed, settings, user, need)
    with graph_place:
        st.divider()
        drawn_before = graph_fragment.registered_keys()
        graph_part(ed, need, settings, user, Slots(export, saved))
        inside = graph_fragment.registered_keys() - drawn_before
    with training_part:
        st.divider()
        training_layer(ed, settings)
    canvas.mark_page(ed)  # what a run of the canvas alone compares with (canvas.fragment)
    graph_fragment.mark_outside(ed, need, graph_fragment.registered_keys() - inside)  # and one of the graph layer


def summary_badge(ed: Editor) -> dict[str, Any]:
    """What other pages show about the current pipeline."""
    analysis = ed.analysis()
    return {"name": ed.doc.get("name"), "nodes": len(ed.nodes), "valid": not ed.problems(),
            "params": analysis.total_params if analysis else None}
