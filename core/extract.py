"""The extractor: the editor's state (flow canvas + data and training forms) → a PipelineSpec.

It reads the flow state exactly as the streamlit-flow component returns it (see
``docs/streamlit-flow.md``), which is messier than a spec:

- nodes created from the canvas' pane menu carry only ``data.content`` (no op, no params);
- edges can dangle after a node was deleted in the browser — they are dropped, and said so;
- the same connection can arrive twice — kept once;
- cycles are accepted by the component — kept, so the validator names them.

Extraction never guesses an op and never drops a node: a node it cannot read becomes a
problem that names it. The reverse direction, :func:`flow_from_spec`, gives the canvas
the nodes and edges of a spec (templates, imported JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from core.errors import Problem, SpecError
from core.load import problems_from_pydantic
from core.spec import SCHEMA_VERSION, PipelineSpec

PORT_ORDER_KEY = "input_order"  # node data: source ids in port order, set by the editor for Add/Concat


@dataclass
class Extraction:
    spec: PipelineSpec | None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # corrections made (dropped dangling edges, …)

    def require(self) -> PipelineSpec:
        if self.spec is None or self.problems:
            raise SpecError(self.problems)
        return self.spec


def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return dict(getattr(obj, "__dict__", {}))


def extract(flow: Any, data_form: dict[str, Any] | None = None, training_form: dict[str, Any] | None = None,
            name: str = "pipeline", description: str = "") -> Extraction:
    """Build a spec from a flow state (object or dict with ``nodes``/``edges``, and the spec's ``blocks``
    as JSON when it has any: the canvas shows their uses as nodes) and the two forms."""
    state = _as_dict(flow)
    raw_nodes = [_as_dict(n) for n in state.get("nodes") or []]
    raw_edges = [_as_dict(e) for e in state.get("edges") or []]
    problems: list[Problem] = []
    notes: list[str] = []

    nodes: list[dict[str, Any]] = []
    ids: set[str] = set()
    port_orders: dict[str, list[str]] = {}
    for raw in raw_nodes:
        node_id = raw.get("id")
        data = raw.get("data") or {}
        if not isinstance(node_id, str):
            problems.append(Problem("model.nodes", "a canvas node has no id", received=repr(node_id)[:80]))
            continue
        op = data.get("op")
        if not isinstance(op, str) or not op:
            content = str(data.get("content", ""))[:40]
            problems.append(Problem(
                f"model.nodes[{_shown(node_id)}].op", "node has no layer type", node=node_id,
                received=f"a canvas node labelled {content!r}" if content else "a node without an op",
                expected="a node added from the palette",
                fix="delete it and add the layer from the palette (nodes made with the canvas menu have no type)"))
            continue
        params = data.get("params") or {}
        if not isinstance(params, dict):
            problems.append(Problem(f"model.nodes[{_shown(node_id)}].params", "must be a mapping",
                                    node=node_id, received=type(params).__name__))
            params = {}
        node: dict[str, Any] = {"id": node_id, "op": op, "params": params}
        label = data.get("label")
        if isinstance(label, str) and label:
            node["label"] = label
        pos = raw.get("position")
        if isinstance(pos, dict) and {"x", "y"} <= pos.keys():
            node["position"] = {"x": pos["x"], "y": pos["y"]}
        order = data.get(PORT_ORDER_KEY)
        if isinstance(order, list):
            port_orders[node_id] = [s for s in order if isinstance(s, str)]
        nodes.append(node)
        ids.add(node_id)
    known = {n.get("id") for n in raw_nodes}

    edges: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for raw in raw_edges:
        src, tgt = raw.get("source"), raw.get("target")
        if src not in known or tgt not in known:
            notes.append(f"dropped edge {src} → {tgt}: its {'source' if src not in known else 'target'} "
                         "node no longer exists")
            continue
        if src not in ids or tgt not in ids:
            continue  # an end is an unreadable node, already reported
        if (src, tgt) in seen:
            notes.append(f"ignored a repeated edge {src} → {tgt}")
            continue
        seen.add((src, tgt))
        edge: dict[str, Any] = {"source": src, "target": tgt}
        port = raw.get("port")
        if port is None and tgt in port_orders and src in port_orders[tgt]:
            port = port_orders[tgt].index(src)
        if port is not None:
            edge["port"] = port
        edges.append(edge)

    doc = {
        "schema_version": SCHEMA_VERSION,
        "name": name or "pipeline",
        "description": description,
        "data": data_form or {},
        "model": {"nodes": nodes, "edges": edges, "blocks": state.get("blocks") or []},
        "training": training_form or {},
    }
    try:
        spec = PipelineSpec.model_validate(doc)
    except ValidationError as exc:
        return Extraction(None, problems + problems_from_pydantic(exc, doc), notes)
    return Extraction(spec if not problems else None, problems, notes)


def flow_from_spec(spec: PipelineSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes and edges in the component's dict format (``StreamlitFlowNode.from_dict`` reads them)."""
    targets_with_ports: dict[str, list[tuple[int, str]]] = {}
    for e in spec.model.edges:
        if e.port is not None:
            targets_with_ports.setdefault(e.target, []).append((e.port, e.source))
    nodes = []
    for i, n in enumerate(spec.model.nodes):
        pos = n.position or _auto_position(i)
        data: dict[str, Any] = {"content": n.label or f"**{n.op}** `{n.id}`", "op": n.op, "params": dict(n.params)}
        if n.label:
            data["label"] = n.label
        if n.id in targets_with_ports:
            data[PORT_ORDER_KEY] = [s for _, s in sorted(targets_with_ports[n.id])]
        nodes.append({
            "id": n.id,
            "position": {"x": pos.x, "y": pos.y},
            "data": data,
            "type": "input" if n.op == "Input" else "output" if n.op == "Output" else "default",
        })
    edges = [{"id": f"st-flow-edge_{e.source}-{e.target}", "source": e.source, "target": e.target}
             for e in spec.model.edges]
    return nodes, edges


def _auto_position(i: int) -> Any:
    from core.spec import Position

    return Position(x=0.0, y=90.0 * i)


def _shown(node_id: str) -> str:
    return repr(node_id)[1:-1][:64]
