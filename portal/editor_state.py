"""The flow editor's state and every edit it supports, without Streamlit (so it can be unit-tested).

The editor holds one *document*: the canvas nodes and edges in the streamlit-flow component's dict
format (see ``docs/streamlit-flow.md``) plus the data and training forms as plain dicts.
Python is the authority for everything except positions: the canvas only reports what the user
did (a new edge, a deleted node, a drag), and :meth:`Editor.apply_canvas_value` turns that into
the same edits the side form and the palette make — so a cycle drawn in the browser is refused
exactly like one made from the form.

Canvas synchronisation (``docs/streamlit-flow.md``): the component takes Python's state when its
timestamp is not older than the component's own last update. Every time what the canvas must show
changes because of Python (an added node, a new parameter, a refused edge, new inferred shapes),
:attr:`Editor.canvas_ts` becomes newer than anything the browser sent (:meth:`Editor._resend`): the
same component takes the new nodes and keeps the user's zoom and pan (a node added from the palette is
sent with the view fitted to the graph). A new document (template, import, undo) or an auto-layout
instead *remounts* the component under a new key (``canvas-{version}``, :meth:`Editor._remount`) and fits the view to the graph. A value read back
under the current key is applied once (by its timestamp).

A value may start from an older state than the one Python sent last; how it is merged without undoing
Python's newer edits is portal/canvas_merge.py's (every node is sent tagged with its state's timestamp).
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from core.errors import Problem, SpecError
from core.extract import PORT_ORDER_KEY, Extraction, extract, flow_from_spec
from core.load import spec_from_json
from core.ops import REGISTRY
from core.spec import DataSpec, PipelineSpec, TrainingSpec
from core.validate import Analysis, analyse
from portal import canvas_merge, canvas_nodes, start_weights
from portal.canvas_merge import SentState
from portal.editor_blocks import BlockEdits, block_from_canvas, block_to_canvas, is_port
from portal.graph_layout import DRAWN_Y_STEP, NODE_X_STEP, NODE_Y_STEP, layered_positions, path_between
from portal.param_text import format_param, md_text, parse_param  # noqa: F401 (forms, tests)

HISTORY_LIMIT = 50

# Values given to required parameters when a node is added from the palette, so a new node is
# valid as soon as it is connected. Per (op, param) first, then per param name.
_EDGE_PREFIX = "st-flow-edge_"
EDGE_TOPIC = "graph.edge"

Level = Literal["info", "success", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    """A message the page shows on every rerun until the user dismisses it or a newer notice on the
    same topic replaces it (a canvas remount reruns the page by itself: a message shown once was gone
    before anyone could read it)."""

    level: Level
    text: str
    area: str = "graph"  # where the page shows it: toolbar | data | graph | training
    topic: str = ""  # what it is about: a newer notice on the topic replaces it, an accepted edit clears it
    id: int = 0


def edge_id(source: str, target: str) -> str:
    """The id the component gives an edge drawn from ``source`` to ``target``."""
    return f"{_EDGE_PREFIX}{source}-{target}"


def starter_params(op: str) -> dict[str, Any]:
    """Parameters of a freshly added node: required ones get a starter value, the rest their defaults."""
    cls = REGISTRY.get(op)
    params: dict[str, Any] = {}
    for prm in cls.params:
        if prm.required:
            params[prm.name] = copy.deepcopy(prm.example)
    return params


def is_multi_input(op: str) -> bool:
    cls = REGISTRY.get(op) if op in REGISTRY else None
    return cls is not None and (cls.max_inputs is None or cls.max_inputs > 1)


def default_data() -> dict[str, Any]:
    return DataSpec().model_dump(mode="json")


def default_training() -> dict[str, Any]:
    return TrainingSpec().model_dump(mode="json")


def _node_dict(node_id: str, op: str, params: dict[str, Any], x: float, y: float) -> dict[str, Any]:
    data: dict[str, Any] = {"op": op, "params": params, "content": f"**{op}** {md_text(node_id)}"}
    if is_multi_input(op):
        data[PORT_ORDER_KEY] = []
    return {
        "id": node_id,
        "position": {"x": float(x), "y": float(y)},
        "data": data,
        "type": "input" if op == "Input" else "output" if op == "Output" else "default",
    }


# --------------------------------------------------------------------------- the editor


CANVAS_KEY_PREFIX = "canvas-"  # the canvas component's widget key: this and the canvas version


@dataclass
class Editor(BlockEdits):
    """One user's editor: the document, its undo history and the canvas synchronisation state. The
    canvas and the graph edits work on :attr:`graph`: the pipeline, or the block opened (portal/editor_blocks.py)."""

    doc: dict[str, Any] = field(default_factory=dict)
    rev: int = 0
    history: list[str] = field(default_factory=list)
    future: list[str] = field(default_factory=list)  # what undo took back, newest last: redo brings it again
    canvas_version: int = 0
    canvas_ts: int = 0
    canvas_fit: bool = True  # fit the view when this canvas version mounts (a new document, a layout)
    last_event_ts: int | None = None
    last_event_sel: Any = None  # the selectedId that value carried
    last_pick_ts: int | None = None  # the moment of the last node click applied (portal/flow_component.py)
    selected: str | None = None
    notices: list[Notice] = field(default_factory=list)
    # Why a value typed into a field was refused, by the field's name (``training.epochs``,
    # ``param.conv1.out_channels``): shown next to the field until it takes a value.
    field_errors: dict[str, str] = field(default_factory=dict)
    _notice_count: int = 0
    # Version of the forms that show the document: part of every form widget's key, so a replaced
    # document (template, import, undo, a run's spec) is shown by new widgets. A browser keeps the
    # value of a widget whose key it knows and sends it back; that is how stale values came back.
    form_version: int = 0
    open_path: list[str] = field(default_factory=list)  # the blocks opened, outermost first
    imports: int = 0  # files imported (or refused) so far: the file uploader is a new, empty one after each
    _sent_signature: Any = None
    _sent_contents: dict[str, Any] = field(default_factory=dict)
    _cache_rev: int = -1
    _extraction: Extraction | None = None
    _analysis: Analysis | None = None
    _canvas_nodes: list[dict[str, Any]] = field(default_factory=list)
    _sent_states: dict[int, SentState] = field(default_factory=dict)  # by timestamp, this component's only

    def __post_init__(self) -> None:
        if not self.doc:
            self.doc = self.blank_doc()
        self._remount()

    @staticmethod
    def blank_doc() -> dict[str, Any]:
        """Input and Output on the canvas, the built-in digits as data, default training."""
        return {
            "name": "pipeline",
            "description": "",
            "nodes": [_node_dict("input", "Input", {}, 0, 0), _node_dict("output", "Output", {}, 0, 4 * NODE_Y_STEP)],
            "edges": [],
            "blocks": [],
            "data": default_data(),
            "training": default_training(),
        }

    # ------------------------------------------------------------------ bookkeeping

    def _snapshot(self, before: str | None = None) -> None:
        """Remember the document before an edit (``before``: as it was, already serialised); a new edit
        ends what redo could bring back."""
        self.history.append(before if before is not None else json.dumps(self.doc))
        if len(self.history) > HISTORY_LIMIT:
            del self.history[0]
        self.future.clear()

    def _changed(self, canvas: bool = True) -> None:
        """After an edit: new revision; ``canvas`` when the browser must be told (Python-side edit)."""
        self.rev += 1
        if canvas:
            self._resend()

    def _remount(self) -> None:
        """Show a new graph: a new component (new key), its view fitted to the graph."""
        self.canvas_version += 1
        # never the timestamp of a state already sent: nodes carry it back (canvas_merge.SENT_KEY), and a value from the
        # old state read as one from this state would drop what Python added in the same millisecond
        self.canvas_ts = max(int(time.time() * 1000), self.canvas_ts + 1)
        self.canvas_fit = True
        self.last_event_ts = self.last_event_sel = self.last_pick_ts = None
        self._sent_signature = None
        self._sent_contents = {}
        self._sent_states = {}

    def _resend(self) -> None:
        """Show Python's state in the same component, keeping the user's zoom and pan: a timestamp newer
        than the component's last update (the newest the browser sent), whatever the two clocks say. A fitted
        view asked for a state not sent yet (a palette add, a new component) is asked for this one."""
        fit = self.canvas_fit and self.canvas_ts not in self._sent_states
        self.canvas_ts = max(int(time.time() * 1000), (self.last_event_ts or 0) + 1, self.canvas_ts + 1)
        self.canvas_fit = fit

    def refresh_forms(self) -> None:
        """The document changed other than through the widget showing it: show it with new widgets."""
        self.form_version += 1

    def notice(self, level: Level, text: str, area: str = "graph", topic: str | None = None) -> Notice:
        """Show ``text`` in ``area`` until dismissed; it replaces the notice on the same ``topic``
        (default: the area)."""
        self._notice_count += 1
        new = Notice(level, text, area, topic or area, self._notice_count)
        self.notices = [n for n in self.notices if n.topic != new.topic] + [new]
        return new

    def notices_in(self, area: str | None = None) -> list[Notice]:
        """The notices to show (all, or those of one area), oldest first; they stay until dismissed."""
        return [n for n in self.notices if area is None or n.area == area]

    def dismiss(self, notice_id: int) -> None:
        self.notices = [n for n in self.notices if n.id != notice_id]

    def clear_topic(self, topic: str) -> None:
        """The user did what a notice asked (e.g. drew an edge that was accepted): drop it."""
        self.notices = [n for n in self.notices if n.topic != topic]

    def refuse_field(self, name: str, text: str) -> None:
        """A value typed into the field ``name`` was not taken: say why next to it, and draw the forms
        again so the field shows the value the document kept."""
        self.field_errors[name] = text
        self.refresh_forms()

    def accept_field(self, name: str) -> None:
        self.field_errors.pop(name, None)

    @property
    def upload_key(self) -> str:
        """Key of the import widget: a fresh, empty uploader after every import, so the same file can be
        chosen again (an uploader that still holds it reports no change)."""
        return f"toolbar.import.{self.imports}"

    @property
    def canvas_key(self) -> str:
        return f"{CANVAS_KEY_PREFIX}{self.canvas_version}"

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.graph["nodes"]

    @property
    def edges(self) -> list[dict[str, Any]]:
        return self.graph["edges"]

    def node(self, node_id: str) -> dict[str, Any]:
        for n in self.nodes:
            if n["id"] == node_id:
                return n
        raise KeyError(node_id)

    def has_node(self, node_id: str | None) -> bool:
        return node_id is not None and any(n["id"] == node_id for n in self.nodes)

    def incoming(self, node_id: str) -> list[str]:
        """Sources feeding ``node_id``, in port order for multi-input ops (else drawing order)."""
        sources = [e["source"] for e in self.edges if e["target"] == node_id]
        order = self.node(node_id)["data"].get(PORT_ORDER_KEY)
        if isinstance(order, list):
            ranked = [s for s in order if s in sources]
            return ranked + [s for s in sources if s not in ranked]
        return sources

    # ------------------------------------------------------------------ edits

    def new_node_id(self, op: str) -> str:
        base = re.sub(r"[^a-z0-9]", "", op.lower()) or "node"
        taken = {n["id"] for n in self.nodes}
        k = 1
        while f"{base}{k}" in taken:
            k += 1
        return f"{base}{k}"

    def add_node(self, op: str, position: tuple[float, float] | None = None) -> str:
        block = self.block(op)
        if op not in REGISTRY and block is None:
            raise KeyError(f"unknown op {op!r}")
        if op in self.open_path:
            self.notice("error", f"A block cannot use itself: {op} is open ({' › '.join(self.open_path)}).",
                        topic="graph.block")
            return ""
        node_id = self.new_node_id(op)
        self._snapshot()
        if position is None:
            # Below the lowest layer; an Output in the way moves one row further down.
            above = [n["position"]["y"] for n in self.nodes if n["data"].get("op") != "Output"]
            position = (0.0, (max(above) + DRAWN_Y_STEP) if above else 0.0)
            for n in self.nodes:
                if n["data"].get("op") == "Output" and abs(n["position"]["x"] - position[0]) < NODE_X_STEP \
                        and n["position"]["y"] < position[1] + DRAWN_Y_STEP:
                    n["position"] = {"x": n["position"]["x"], "y": position[1] + DRAWN_Y_STEP}
        self.nodes.append(_node_dict(node_id, op, starter_params(op) if block is None else {}, *position))
        if block is not None and len(block["inputs"]) > 1:
            self.nodes[-1]["data"][PORT_ORDER_KEY] = []
        self.selected = node_id
        # Sent to the same component with its view fitted (once the new node is measured: portal/flow_component.py),
        # so the new node is in sight, not remounted (a new iframe: the 2.8 MB bundle parsed and every node drawn
        # again, 0.6 s of a 1 s palette add at 100 nodes on an idle machine; docs/performance.md). The remount had
        # stayed because the component's answer to the state before the add, read after it, dropped the new node;
        # values are now applied against the state they start from (portal/canvas_merge.py), and the served
        # component no longer answers Python's states at all.
        self._changed()
        self.canvas_fit = True
        return node_id

    def delete_node(self, node_id: str) -> None:
        self._snapshot()
        self._drop_node(node_id)
        self._changed()

    def _drop_node(self, node_id: str) -> None:
        self.graph["nodes"] = [n for n in self.nodes if n["id"] != node_id]
        self.graph["edges"] = [e for e in self.edges if node_id not in (e["source"], e["target"])]
        for n in self.nodes:
            order = n["data"].get(PORT_ORDER_KEY)
            if isinstance(order, list) and node_id in order:
                order.remove(node_id)
        if self.selected == node_id:
            self.selected = None

    def refusal(self, source: str, target: str) -> str | None:
        """Why the edge ``source → target`` cannot be drawn, or None when it can."""
        if not self.has_node(source) or not self.has_node(target):
            return f"{source} → {target} connects a node that does not exist"
        if source == target:
            return f"{source} cannot feed itself"
        if is_port(self.node(target)):
            return f"{target} is an input port of the block: nothing inside the block feeds it"
        if any(e["source"] == source and e["target"] == target for e in self.edges):
            return f"{source} → {target} exists already"
        back = path_between(self.edges, target, source)
        if back is not None:
            loop = " → ".join([source, *back])
            return (f"Refused the connection {source} → {target}: it would close the cycle {loop}. "
                    "Data flows one way, from Input to Output.")
        return None

    def connect(self, source: str, target: str) -> bool:
        reason = self.refusal(source, target)
        if reason is not None:
            self._refused_edge(reason)
            return False
        self._snapshot()
        self._add_edge(source, target)
        self._changed()
        return True

    def _refused_edge(self, reason: str) -> None:
        self.notice("error" if "cycle" in reason or "itself" in reason else "warning", reason, topic=EDGE_TOPIC)

    def _add_edge(self, source: str, target: str) -> None:
        """Draw an accepted edge (side form or canvas): the notice about the last refused one goes."""
        self.clear_topic(EDGE_TOPIC)
        self.edges.append({"id": edge_id(source, target), "source": source, "target": target})
        order = self.node(target)["data"].get(PORT_ORDER_KEY)
        if isinstance(order, list) and source not in order:
            order.append(source)

    def disconnect(self, source: str, target: str) -> None:
        self._snapshot()
        self._drop_edge(source, target)
        self._changed()

    def _drop_edge(self, source: str, target: str) -> None:
        self.graph["edges"] = [e for e in self.edges if not (e["source"] == source and e["target"] == target)]
        if self.has_node(target):
            order = self.node(target)["data"].get(PORT_ORDER_KEY)
            if isinstance(order, list) and source in order:
                order.remove(source)

    def move_port(self, node_id: str, source: str, delta: int) -> None:
        """Move ``source`` up (-1) or down (+1) in the port order of a multi-input node."""
        order = self.incoming(node_id)
        i = order.index(source)
        j = i + delta
        if not 0 <= j < len(order):
            return
        self._snapshot()
        order[i], order[j] = order[j], order[i]
        self.node(node_id)["data"][PORT_ORDER_KEY] = order
        self._changed()

    def set_param(self, node_id: str, name: str, value: Any) -> None:
        """Set (or, with ``None`` for a non-optional parameter with a default, reset) one parameter."""
        params = self.node(node_id)["data"].setdefault("params", {})
        if params.get(name, _MISSING) == value:
            return
        self._snapshot()
        params[name] = value
        self._changed(canvas=False)

    def set_label(self, node_id: str, label: str) -> None:
        data = self.node(node_id)["data"]
        if (data.get("label") or "") == label:
            return
        self._snapshot()
        if label:
            data["label"] = label
        else:
            data.pop("label", None)
        self._changed(canvas=False)

    def set_field(self, section: Literal["data", "training", "meta"], path: tuple[str, ...], value: Any) -> None:
        """Set a data-layer, training-layer or document field (``meta``: name, description)."""
        target = self.doc if section == "meta" else self.doc[section]
        for key in path[:-1]:
            target = target.setdefault(key, {})
        if target.get(path[-1], _MISSING) == value:
            return
        self._snapshot()
        target[path[-1]] = value
        name = f"{section}.{'.'.join(path)}"  # a note on a value refused there is about a value now gone
        self.field_errors = {k: v for k, v in self.field_errors.items() if k != name and not k.startswith(name + ".")}
        self._changed(canvas=False)

    def set_list(self, which: Literal["preprocessing", "augmentation"], steps: list[dict[str, Any]]) -> None:
        if self.doc["data"].get(which) == steps:
            return
        self._snapshot()
        self.doc["data"][which] = steps
        self._changed(canvas=False)

    def layout(self) -> None:
        """Lay the graph out top to bottom (portal/graph_layout.py: skip edges in columns of their own, a
        long graph wrapped into columns) and fit the view to it. The browser's own layered layout (ELK)
        is not asked: it would put the skip edges back behind the nodes they skip."""
        self._snapshot()
        pos = layered_positions(self.nodes, self.edges)
        for n in self.nodes:
            x, y = pos[n["id"]]
            n["position"] = {"x": x, "y": y}
        self._changed(canvas=False)
        self._remount()

    def undo(self) -> bool:
        if not self.history:
            self.notice("info", "Nothing to undo.", "toolbar", topic="undo")
            return False
        self.future.append(json.dumps(self.doc))
        self._show(json.loads(self.history.pop()))
        return True

    def redo(self) -> bool:
        """Bring back what the last undo took back (until a new edit is made)."""
        if not self.future:
            self.notice("info", "Nothing to redo.", "toolbar", topic="undo")
            return False
        self.history.append(json.dumps(self.doc))
        self._show(json.loads(self.future.pop()))
        return True

    def _show(self, doc: dict[str, Any]) -> None:
        """Show ``doc`` (from the history) as the document, with new forms and a remounted canvas."""
        self.doc = doc
        self.field_errors = {}  # about values of the document that is gone
        self._forget_gone_blocks()
        if not self.has_node(self.selected):
            self.selected = None
        self.refresh_forms()
        self._changed(canvas=False)
        self._remount()

    def replace_doc(self, doc: dict[str, Any]) -> None:
        """A new document (template, import, a run's spec, a blank one): the forms become views of it."""
        self._snapshot()
        self.doc = doc
        self.open_path = []
        self.selected = None
        self.notices = []  # about the document that is gone; the caller says what replaced it
        self.field_errors = {}
        self.refresh_forms()
        self._changed(canvas=False)
        self._remount()

    def open_document(self, doc: dict[str, Any], history: list[str], future: list[str]) -> None:
        """Show a saved draft: its document, with its own undo and redo history."""
        self.replace_doc(doc)
        self.history, self.future = list(history), list(future)

    def load_spec(self, spec: PipelineSpec) -> None:
        """Replace the document with a spec (template or import); missing positions are laid out."""
        nodes, edges = flow_from_spec(spec)
        for e in edges:
            e["id"] = edge_id(e["source"], e["target"])
        if any(n.position is None for n in spec.model.nodes):
            pos = layered_positions(nodes, edges)
            for n in nodes:
                n["position"] = {"x": pos[n["id"]][0], "y": pos[n["id"]][1]}
        for n in nodes:
            if self.multi_input(n["data"]["op"]) and PORT_ORDER_KEY not in n["data"]:
                n["data"][PORT_ORDER_KEY] = [e["source"] for e in edges if e["target"] == n["id"]]
        self.replace_doc({
            "name": spec.name,
            "description": spec.description,
            "nodes": nodes,
            "edges": edges,
            "blocks": [block_to_canvas(b, self.multi_input) for b in spec.model.blocks],
            "data": spec.data.model_dump(mode="json"),
            "training": spec.training.model_dump(mode="json"),
        })

    def load_json(self, text: str | bytes, source: str = "uploaded file") -> None:
        """Import a spec file; raises SpecError listing every structural problem."""
        self.load_spec(spec_from_json(text, source=source))

    # ------------------------------------------------------------------ the canvas

    def apply_canvas_value(self, value: Any) -> bool:
        """Apply what the component returned under the current key; False when already applied or stale.
        Only what the browser changed relative to the state the value starts from is applied
        (portal/canvas_merge.py: a late value never undoes Python's newer edits)."""
        return canvas_merge.apply_canvas_value(self, value)

    # ------------------------------------------------------------------ derived state (cached per revision)

    def _refresh(self) -> None:
        if self._cache_rev == self.rev and self._extraction is not None:
            return
        d = self.doc
        blocks = [block_from_canvas(b) for b in d.get("blocks") or []]  # the spec's form of the open-able blocks
        self._extraction = extract({"nodes": d["nodes"], "edges": d["edges"], "blocks": blocks}, d["data"], d["training"],
                                   name=d.get("name") or "pipeline", description=d.get("description") or "")
        self._analysis = analyse(self._extraction.spec) if self._extraction.spec is not None else None
        self._cache_rev = self.rev
        self._canvas_nodes = canvas_nodes.decorate(self, self._analysis)

    def extraction(self) -> Extraction:
        self._refresh()
        assert self._extraction is not None
        return self._extraction

    def analysis(self) -> Analysis | None:
        self._refresh()
        return self._analysis

    def problems(self) -> list[Problem]:
        """Every problem: the extractor's (unreadable nodes, bad fields) and the validator's."""
        ext = self.extraction()
        found = list(ext.problems) + (list(self._analysis.problems) if self._analysis else [])
        return found + start_weights.problems(self)  # weights that no longer fit an edited node

    def spec(self) -> PipelineSpec:
        """The current spec; raises SpecError when the document cannot be read as one."""
        ext = self.extraction()
        if ext.spec is None:
            raise SpecError(ext.problems)
        return ext.spec

    def valid_spec(self) -> PipelineSpec:
        """The spec when it passes validation; raises SpecError listing every problem otherwise."""
        problems = self.problems()
        if problems:
            raise SpecError(problems)
        return self.spec()

    def spec_json(self) -> str:
        return self.spec().to_json()

    def canvas_payload(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Decorated nodes (portal/canvas_nodes.py) and edges for the component. Resends when what it must
        show changed."""
        self._refresh()
        signature = (tuple((n["id"], n["data"]["content"], n["style"]["border"]) for n in self._canvas_nodes),
                     tuple(sorted((e["source"], e["target"]) for e in self.edges)))
        if self._sent_signature is not None and signature != self._sent_signature:
            self._resend()
        self._sent_signature = signature
        self._sent_contents = {n["id"]: n["data"]["content"] for n in self._canvas_nodes}
        positions = {n["id"]: n["position"] for n in self.nodes}  # a drag moves a node without a new revision
        for n in self._canvas_nodes:
            n["position"] = positions.get(n["id"], n["position"])
        canvas_merge.remember_sent(self, positions)  # what the browser's values from this state start from
        return self._canvas_nodes, self.edges


_MISSING = object()
