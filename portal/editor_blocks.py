"""Composite blocks in the editor, without Streamlit: a block's canvas form, and the editor's block edits.

The editor's document keeps every block of the pipeline under ``doc["blocks"]`` in the canvas'
own format (like the main graph), so the same edits, checks and canvas synchronisation work inside
a block: :class:`BlockEdits` (a base of :class:`portal.editor_state.Editor`) *opens* a block by
making it the graph the editor edits (``Editor.graph``), and every edit made there changes the one
definition, hence every use of it. A block's input ports are drawn as nodes of their own (marked
with :data:`PORT_KEY`, not deletable, no incoming edges); edges leave them under the port's name,
as the spec writes them. The node named by the block's ``output`` is marked on the canvas.

The spec format is :class:`core.spec.BlockSpec` (docs/blocks.md); :func:`block_to_canvas` and :func:`block_from_canvas` convert.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from core.block_expansion import flat_id, param_reference, references
from core.errors import Problem
from core.extract import PORT_ORDER_KEY
from core.ops import REGISTRY, Param
from core.spec import BLOCK_NAME_PATTERN, BlockSpec
from portal.graph_layout import NODE_STYLE, NODE_X_STEP, NODE_Y_STEP, layered_positions, path_between

PORT_KEY = "block_port"  # node data: this canvas node is the block's input port of that name
BOUND_KEY = "param"  # an inner param value {"param": NAME} is bound to the block's parameter NAME (core.block_expansion)
BLOCK_TOPIC = "graph.block"
# Block parameter types (core.spec.BlockParamType) as the side form's parameter kinds; "str" has none.
PARAM_KINDS = {"int": "int", "float": "float", "bool": "bool", "ints": "ints"}

USE_STYLE = {**NODE_STYLE, "border": "3px double #1f4e9c", "background": "#e8effb"}
PORT_STYLE = {**NODE_STYLE, "border": "2px solid #2e7d32", "background": "#e8f5e9"}


def is_port(node: dict[str, Any]) -> bool:
    return bool((node.get("data") or {}).get(PORT_KEY))


def bound_to(value: Any) -> str | None:
    """The block parameter a value stands for (``{"param": NAME}``), or None for a plain value."""
    return param_reference(value)


def port_node(name: str, index: int, x: float = 0.0, y: float = 0.0) -> dict[str, Any]:
    return {"id": name, "position": {"x": x, "y": y}, "type": "input",
            "data": {PORT_KEY: True, "content": f"input {index}: {name}"}}


def block_to_canvas(block: BlockSpec, multi_input: Callable[[str], bool]) -> dict[str, Any]:
    """A spec block in the editor's canvas format; nodes without positions (and the ports) are laid out.

    ``multi_input(op)`` says whether a node of that op keeps an explicit port order."""
    nodes: list[dict[str, Any]] = [port_node(name, i) for i, name in enumerate(block.inputs)]
    ports: dict[str, list[tuple[int, str]]] = {}
    for e in block.edges:
        if e.port is not None:
            ports.setdefault(e.target, []).append((e.port, e.source))
    for n in block.nodes:
        data: dict[str, Any] = {"op": n.op, "params": dict(n.params), "content": n.op}
        if n.label:
            data["label"] = n.label
        if n.id in ports:
            data[PORT_ORDER_KEY] = [s for _, s in sorted(ports[n.id])]
        elif multi_input(n.op):
            data[PORT_ORDER_KEY] = [e.source for e in block.edges if e.target == n.id]
        pos = n.position
        nodes.append({"id": n.id, "position": {"x": pos.x if pos else 0.0, "y": pos.y if pos else 0.0},
                      "data": data, "type": "default"})
    edges = [{"id": f"st-flow-edge_{e.source}-{e.target}", "source": e.source, "target": e.target}
             for e in block.edges]
    if any(n.position is None for n in block.nodes):  # lay it all out, ports first
        pos = layered_positions(nodes, edges)
        for n in nodes:
            n["position"] = {"x": pos[n["id"]][0], "y": pos[n["id"]][1]}
    else:  # the spec placed its nodes; the ports (never stored) go in a row above them
        top = min((n.position.y for n in block.nodes if n.position), default=NODE_Y_STEP)
        for i, n in enumerate(nodes[:len(block.inputs)]):
            n["position"] = {"x": (i - (len(block.inputs) - 1) / 2) * NODE_X_STEP, "y": top - NODE_Y_STEP}
    return {
        "name": block.name,
        "description": block.description,
        "inputs": list(block.inputs),
        "params": [p.model_dump(mode="json") for p in block.params],
        "output": block.output,
        "nodes": nodes,
        "edges": edges,
    }


def block_from_canvas(block: dict[str, Any]) -> dict[str, Any]:
    """The spec's form of a block kept in canvas format (validated with the rest of the document)."""
    orders = {n["id"]: n["data"].get(PORT_ORDER_KEY) for n in block["nodes"]}
    nodes = []
    for n in block["nodes"]:
        if is_port(n):
            continue
        data = n.get("data") or {}
        node: dict[str, Any] = {"id": n["id"], "op": data.get("op") or "", "params": data.get("params") or {}}
        if data.get("label"):
            node["label"] = data["label"]
        if isinstance(n.get("position"), dict):
            node["position"] = {"x": n["position"]["x"], "y": n["position"]["y"]}
        nodes.append(node)
    edges = []
    for e in block["edges"]:
        edge: dict[str, Any] = {"source": e["source"], "target": e["target"]}
        order = orders.get(e["target"])
        if isinstance(order, list) and e["source"] in order:
            edge["port"] = order.index(e["source"])
        edges.append(edge)
    return {"name": block["name"], "description": block.get("description") or "", "inputs": list(block["inputs"]),
            "params": block["params"], "nodes": nodes, "edges": edges, "output": block["output"]}


def use_params(block: dict[str, Any]) -> list[Param]:
    """The block's parameters as the side form's declarations (a use sets them; the default otherwise)."""
    return [Param(p["name"], PARAM_KINDS[p["type"]], default=p["default"], help=p.get("description") or "")  # type: ignore[arg-type]
            for p in block["params"] if p["type"] in PARAM_KINDS]


class BlockEdits:
    """The editor's block navigation and block edits (mixed into :class:`portal.editor_state.Editor`,
    which provides ``doc``, ``open_path``, ``selected`` and the bookkeeping methods used here)."""

    doc: dict[str, Any]
    open_path: list[str]
    selected: str | None
    _cache_rev: int

    @property
    def blocks(self) -> list[dict[str, Any]]:
        return self.doc.setdefault("blocks", [])

    def block(self, name: Any) -> dict[str, Any] | None:
        """The block called ``name`` (canvas format), or None when ``name`` is not one of this pipeline's."""
        if not isinstance(name, str) or name in REGISTRY:
            return None
        return next((b for b in self.blocks if b["name"] == name), None)

    @property
    def open_block_name(self) -> str | None:
        """The block shown on the canvas, or None for the pipeline itself."""
        return self.open_path[-1] if self.open_path else None

    @property
    def graph(self) -> dict[str, Any]:
        """The graph the canvas shows and every graph edit changes: the open block, or the pipeline."""
        name = self.open_block_name
        found = self.block(name) if name else None
        return found if found is not None else self.doc

    def multi_input(self, op: Any) -> bool:
        """Whether a node of ``op`` takes several inputs in an explicit port order (Add, Concat, a block
        with several input ports)."""
        if op in REGISTRY:
            cls = REGISTRY.get(op)
            return cls.max_inputs is None or cls.max_inputs > 1
        block = self.block(op)
        return block is not None and len(block["inputs"]) > 1

    def graph_problems(self) -> dict[str, list[Problem]]:
        """The problems of the nodes on the canvas, by node id: the pipeline's own, or (a block open)
        those located inside the open block (``… > block NAME > NODE…``, ``model.blocks[NAME].nodes[NODE]…``)."""
        found: dict[str, list[Problem]] = {}
        name = self.open_block_name
        ids = [n["id"] for n in self.graph["nodes"]] if name else []
        for p in self.problems():  # type: ignore[attr-defined]
            if not name:
                if p.node is not None:
                    found.setdefault(p.node, []).append(p)
                continue
            at = [i for i in ids if re.search(rf"(block {re.escape(name)} > |blocks\[{re.escape(name)}\]\.nodes\[)"
                                              rf"{re.escape(i)}(?=[.\] ]|$)", p.location)]
            if at:  # ids may hold dots: the longest one that fits names the node
                found.setdefault(max(at, key=len), []).append(p)
        return found

    def shapes_use(self) -> str | None:
        """With a block open: the expanded id of its first use reached from the pipeline along the
        blocks opened (its inner nodes show that use's shapes), or None (the pipeline, or no use)."""
        prefix: str | None = None
        graph = self.doc
        for name in self.open_path:
            use = next((n["id"] for n in graph["nodes"] if (n.get("data") or {}).get("op") == name), None)
            block = self.block(name)
            if use is None or block is None:
                return None
            prefix = use if prefix is None else flat_id(prefix, use)
            graph = block
        return prefix

    def info_key(self, node_id: str) -> str | None:
        """The id under which the analysis holds what a node on the canvas computes (an open block's
        node: in its first use), or None when the open block has no use to take it from."""
        if not self.open_path:
            return node_id
        use = self.shapes_use()
        return flat_id(use, node_id) if use else None

    def uses(self, name: str) -> list[tuple[str | None, str]]:
        """Every use of block ``name``: (the block it is in, or None for the pipeline; the node id)."""
        found: list[tuple[str | None, str]] = [(None, n["id"]) for n in self.doc["nodes"] if n["data"].get("op") == name]
        for b in self.blocks:
            found += [(b["name"], n["id"]) for n in b["nodes"] if (n.get("data") or {}).get("op") == name]
        return found

    def open_block(self, name: str) -> bool:
        """Show block ``name`` on the canvas for editing (from the pipeline or from the open block)."""
        if self.block(name) is None:
            self.notice("error", f"There is no block {name!r} in this pipeline.", topic=BLOCK_TOPIC)  # type: ignore[attr-defined]
            return False
        if name in self.open_path:
            self.open_path = self.open_path[:self.open_path.index(name) + 1]
        else:
            self.open_path = [*self.open_path, name]
        self._shown_graph_changed()
        return True

    def close_block(self, depth: int = 0) -> None:
        """Go back up to ``depth`` blocks deep (0: the pipeline)."""
        if depth >= len(self.open_path):
            return
        self.open_path = self.open_path[:depth]
        self._shown_graph_changed()

    def _shown_graph_changed(self) -> None:
        """Another graph is on the canvas: a new component fitted to it, and forms for its nodes."""
        self.selected = None
        self._cache_rev = -1  # the canvas' nodes are decorated anew
        self.clear_topic(BLOCK_TOPIC)  # type: ignore[attr-defined]
        self.refresh_forms()  # type: ignore[attr-defined]
        self._remount()  # type: ignore[attr-defined]

    def _forget_gone_blocks(self) -> None:
        """After the document changed (undo): close blocks it no longer has."""
        keep: list[str] = []
        for name in self.open_path:
            if self.block(name) is None:
                break
            keep.append(name)
        self.open_path = keep

    def set_block_output(self, node_id: str) -> None:
        """Make ``node_id`` (a node of the open block) the node whose output the block returns."""
        block = self.block(self.open_block_name)
        if block is None or block["output"] == node_id:
            return
        self._snapshot()  # type: ignore[attr-defined]
        block["output"] = node_id
        self._changed()  # type: ignore[attr-defined]

    def bind_param(self, node_id: str, name: str, block_param: str | None) -> None:
        """Bind the open block's node parameter ``name`` to the block's parameter ``block_param``, or
        (None) unbind it, giving it the block parameter's default as a plain value."""
        block = self.block(self.open_block_name)
        if block is None:
            return
        params = self.node(node_id)["data"].setdefault("params", {})  # type: ignore[attr-defined]
        if block_param is None:
            current = bound_to(params.get(name))
            decl = next((p for p in block["params"] if p["name"] == current), None)
            if decl is None:
                return
            value: Any = decl["default"]
        else:
            value = {BOUND_KEY: block_param}
        self.set_param(node_id, name, value)  # type: ignore[attr-defined]

    def make_block(self, node_ids: list[str], name: str) -> str | None:
        """Turn the nodes ``node_ids`` of the shown graph into a new block ``name`` used once in their
        place (the edges into them become its input ports, in order; the one node feeding the rest of
        the graph, or the only one feeding nothing, its output). None when done, else why not."""
        why = self._block_refusal(node_ids, name)
        if why:
            return why
        chosen = set(node_ids)
        edges = self.graph["edges"]
        sources = list(dict.fromkeys(e["source"] for e in edges if e["target"] in chosen and e["source"] not in chosen))
        feeding = {e["source"] for e in edges if e["source"] in chosen and e["target"] not in chosen}
        sinks = [i for i in node_ids if not any(e["source"] == i and e["target"] in chosen for e in edges)]
        outs = feeding or set(sinks)
        if len(outs) != 1 or not sources:
            return (f"Nothing feeds {', '.join(node_ids)} from outside: a block needs an input." if not sources else
                    f"A block has one output, and {', '.join(sorted(outs))} would each be one (they feed the rest "
                    "of the graph, or nothing). Choose nodes that end in one.")
        [output] = outs
        ports = [f"x{i}" if len(sources) > 1 else "x" for i in range(len(sources))]
        ports = [p if p not in chosen else f"{p}_in" for p in ports]
        port_of = dict(zip(sources, ports))
        inner = [copy.deepcopy(n) for n in self.graph["nodes"] if n["id"] in chosen]
        for n in inner:
            order = n["data"].get(PORT_ORDER_KEY)
            if isinstance(order, list):
                n["data"][PORT_ORDER_KEY] = [port_of.get(s, s) for s in order]
        top = min(n["position"]["y"] for n in inner)
        inner_edges = [{**e, "id": f"st-flow-edge_{port_of.get(e['source'], e['source'])}-{e['target']}",
                        "source": port_of.get(e["source"], e["source"])} for e in edges if e["target"] in chosen]
        nodes = [port_node(p, i, (i - (len(ports) - 1) / 2) * NODE_X_STEP, top - NODE_Y_STEP) for i, p in enumerate(ports)]
        use = self.new_node_id(name)  # type: ignore[attr-defined]
        rewired: list[dict[str, Any]] = []
        for e in edges:
            if e["source"] in chosen and e["target"] in chosen:
                continue
            src = use if e["source"] in chosen else e["source"]
            tgt = use if e["target"] in chosen else e["target"]
            if (src, tgt) not in [(r["source"], r["target"]) for r in rewired]:
                rewired.append({**e, "id": f"st-flow-edge_{src}-{tgt}", "source": src, "target": tgt})
        if any(path_between(rewired, r["target"], use) for r in rewired if r["source"] == use):
            return (f"{', '.join(node_ids)} leave out a node between them (their one block node would feed "
                    "itself): add the nodes in between.")
        # parameters bound to the open block's: the new block declares them, and its use passes them on
        used = {r for n in inner for v in (n["data"].get("params") or {}).values() for r in references(v)}
        declared = [copy.deepcopy(p) for p in self.graph.get("params") or [] if p["name"] in used]
        self._snapshot()  # type: ignore[attr-defined]
        self.blocks.append({"name": name, "description": "", "inputs": ports, "params": declared, "output": output,
                            "nodes": nodes + inner, "edges": inner_edges})
        first = inner[0]["position"]
        data: dict[str, Any] = {"op": name, "params": {p["name"]: {BOUND_KEY: p["name"]} for p in declared},
                                "content": name}
        if len(sources) > 1:
            data[PORT_ORDER_KEY] = list(sources)
        self.graph["nodes"] = [n for n in self.graph["nodes"] if n["id"] not in chosen] + [
            {"id": use, "position": dict(first), "data": data, "type": "default"}]
        for n in self.graph["nodes"]:  # a multi-input node fed by the block's output: the use takes its port
            order = n["data"].get(PORT_ORDER_KEY)
            if isinstance(order, list) and n["id"] != use:
                order[:] = [use if s == output else s for s in order]
        self.graph["edges"] = rewired
        self.selected = use
        self.refresh_forms()  # type: ignore[attr-defined]
        self._changed(canvas=False)  # type: ignore[attr-defined]
        self._remount()  # type: ignore[attr-defined]
        return None

    def _block_refusal(self, node_ids: list[str], name: str) -> str | None:
        shown = {n["id"]: n for n in self.graph["nodes"]}
        if not re.fullmatch(BLOCK_NAME_PATTERN, name or ""):
            return (f"{name!r} cannot name a block: use letters, digits and _ (not starting with a digit), "
                    "at most 64 characters.")
        if name in REGISTRY or self.block(name) is not None:
            return f"{name} is taken already (by {'a layer type' if name in REGISTRY else 'a block'}); choose another name."
        if not node_ids:
            return "Choose the nodes that make up the block."
        bad = [i for i in node_ids if i not in shown or is_port(shown[i])
               or shown[i]["data"].get("op") in ("Input", "Output")]
        if bad:
            return f"{', '.join(bad)} cannot go into a block (Input, Output and a block's ports stay where they are)."
        return None
