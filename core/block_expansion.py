"""Composite blocks: checking their definitions and expanding their uses into the flat graph.

A block (:class:`core.spec.BlockSpec`) is a named subgraph with input ports, one output and typed
parameters; a node whose ``op`` is a block's name is a *use* of it. :func:`expand` replaces every
use by the block's nodes, with ``{"param": NAME}`` values replaced by the use's value (or the
parameter's default), so shape inference, the summary, the canonical weights and the ONNX export
see an ordinary (version-1 shaped) graph.

Expanded node ids join the use's id and the inner id with ``__``: node ``conv1`` of the use
``layer1_0`` becomes ``layer1_0__conv1`` (nested uses join again: ``stage1__block0__conv1``). An id
longer than the 64 characters a node id may have keeps its first 55 and ends with ``_`` and 8 hex
digits of a hash of the whole, so it stays unique and fits the node-id pattern.

:func:`expansion` never raises: it returns the flat spec, where every flat node came from and
every problem of the block definitions and their uses (problems name the use, the block and the
inner node: ``model.nodes[layer1_0] > block basic_block > conv1.params.out_channels``). A use whose
block or parameters are wrong is left in the flat graph as an *opaque* node, so the rest of the
graph is still checked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from core.errors import Problem, SpecError
from core.ops import REGISTRY
from core.spec import BlockSpec, EdgeSpec, ModelSpec, NodeSpec, PipelineSpec, param_value_fits

SEPARATOR = "__"
MAX_ID = 64


@dataclass(frozen=True)
class Origin:
    """Where a flat node came from: the top-level use and the (block, inner node id) steps inside it."""

    use: str
    path: tuple[tuple[str, str], ...]

    def location(self, rest: str = "") -> str:
        """``model.nodes[use] > block b > inner<rest>`` (nested uses add ``> block c > inner``)."""
        steps = " > ".join(f"block {block} > {inner}" for block, inner in self.path)
        return f"model.nodes[{self.use}] > {steps}{rest}"


@dataclass
class Expansion:
    spec: PipelineSpec  # the flat graph (no blocks); opaque uses stay as nodes with the block's name
    origins: dict[str, Origin] = field(default_factory=dict)  # flat id -> where it came from
    edge_locations: list[str] = field(default_factory=list)  # per flat edge: where it was written
    problems: list[Problem] = field(default_factory=list)
    opaque: set[str] = field(default_factory=set)  # uses not expanded because of a problem
    outputs: dict[str, str] = field(default_factory=dict)  # top-level use -> flat id of its output
    ports: dict[str, list[str]] = field(default_factory=dict)  # top-level use -> flat source of each input port


def flat_id(prefix: str, inner: str) -> str:
    """The expanded id of node ``inner`` in the use ``prefix`` (see the module docstring)."""
    joined = f"{prefix}{SEPARATOR}{inner}"
    if len(joined) <= MAX_ID:
        return joined
    return f"{joined[:55]}_{hashlib.sha256(joined.encode()).hexdigest()[:8]}"


def param_reference(value: Any) -> str | None:
    """``NAME`` when ``value`` is a block-parameter reference ``{"param": NAME}``, else None."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("param"), str):
        return value["param"]
    return None


def substitute(value: Any, values: dict[str, Any]) -> Any:
    """``value`` with every ``{"param": NAME}`` (also inside lists) replaced by ``values[NAME]``."""
    ref = param_reference(value)
    if ref is not None:
        return values[ref]
    if isinstance(value, list):
        return [substitute(v, values) for v in value]
    return value


def references(value: Any) -> list[str]:
    ref = param_reference(value)
    if ref is not None:
        return [ref]
    if isinstance(value, list):
        return [r for v in value for r in references(v)]
    return []


def use_values(block: BlockSpec, given: dict[str, Any]) -> dict[str, Any]:
    """A use's parameter values: the given ones, the defaults for the rest."""
    return {p.name: given.get(p.name, p.default) for p in block.params}


def expand(spec: PipelineSpec) -> PipelineSpec:
    """The flat graph of ``spec``; raises :class:`SpecError` when a block or a use is wrong.

    A spec without blocks is returned as it is."""
    if not spec.model.blocks:
        return spec
    result = expansion(spec)
    if result.problems:
        raise SpecError(result.problems)
    return result.spec


def expansion(spec: PipelineSpec) -> Expansion:
    return _Expander(spec).run()


class _Expander:
    def __init__(self, spec: PipelineSpec) -> None:
        self.spec = spec
        self.blocks: dict[str, BlockSpec] = {}
        self.broken: set[str] = set()  # blocks whose definition (or a block they use) is wrong
        self.problems: list[Problem] = []
        self.nodes: list[NodeSpec] = []
        self.edges: list[EdgeSpec] = []
        self.edge_locations: list[str] = []
        self.origins: dict[str, Origin] = {}
        self.opaque: set[str] = set()
        self.outputs: dict[str, str] = {}
        self.ports: dict[str, list[str]] = {}

    def run(self) -> Expansion:
        for block in self.spec.model.blocks:
            if block.name in self.blocks:
                self.problem(f"model.blocks[{block.name}].name", "is the name of more than one block",
                             fix="give every block its own name")
                continue
            self.blocks[block.name] = block
        for block in self.blocks.values():
            self._check_definition(block)
        self._recursion()
        self._propagate_broken()
        self._top_level()
        flat = ModelSpec(nodes=self.nodes, edges=self.edges)
        spec = self.spec.model_copy(update={"model": flat})
        return Expansion(spec, self.origins, self.edge_locations, self.problems, self.opaque, self.outputs,
                         self.ports)

    def problem(self, location: str, message: str, node: str | None = None, **kw: Any) -> None:
        self.problems.append(Problem(location, message, node=node, **kw))

    # ------------------------------------------------------------------ definitions

    def _check_definition(self, block: BlockSpec) -> None:
        loc = f"model.blocks[{block.name}]"
        before = len(self.problems)
        if block.name in REGISTRY:
            self.problem(f"{loc}.name", "is the name of a catalogue op", received=block.name,
                         expected="a name no op has", fix=f"rename the block, e.g. {block.name.lower()}_block")
        declared: set[str] = set()
        for p in block.params:
            if p.name in declared:
                self.problem(f"{loc}.params[{p.name}]", "declares a parameter a second time",
                             fix="give every parameter its own name")
            declared.add(p.name)
        ports: set[str] = set()
        for port in block.inputs:
            if port in ports:
                self.problem(f"{loc}.inputs", f"names the input {port} twice", received=port,
                             fix="give every input port its own name")
            ports.add(port)
        ids: set[str] = set()
        for node in block.nodes:
            nloc = f"{loc}.nodes[{node.id}]"
            if node.id in ids or node.id in ports:
                self.problem(f"{nloc}.id", "is used by another node or input port of the block",
                             fix="give every node its own id")
            ids.add(node.id)
            if node.op in ("Input", "Output"):
                self.problem(f"{nloc}.op", f"a block cannot contain an {node.op} node", received=node.op,
                             fix="the block's inputs are its input ports and its output is `output`")
            elif node.op not in REGISTRY and node.op not in self.blocks:
                self.problem(f"{nloc}.op", "unknown op or block", received=repr(node.op)[:80],
                             expected="an op of the palette or a block of this spec",
                             fix="pick an op from the palette or define the block")
            for key, value in node.params.items():
                for ref in references(value):
                    if ref not in declared:
                        self.problem(f"{nloc}.params.{key}", f"refers to the parameter {ref!r}, which the block "
                                     "does not declare", received=repr(value)[:80],
                                     expected="one of: " + (", ".join(sorted(declared)) or "no parameters declared"),
                                     fix=f"declare {ref} in the block's params, or use a value")
        succs: dict[str, list[str]] = {n: [] for n in ids | ports}
        for k, edge in enumerate(block.edges):
            eloc = f"{loc}.edges[{k}]"
            if edge.source not in ids and edge.source not in ports:
                self.problem(eloc, "starts at a node or input port the block does not have",
                             received=f"{edge.source} → {edge.target}", fix="remove the edge or add the node")
            elif edge.target not in ids:
                self.problem(eloc, "ends at a node the block does not have" if edge.target not in ports else
                             "ends at an input port", received=f"{edge.source} → {edge.target}",
                             fix="an edge inside a block ends at one of its nodes")
            else:
                succs[edge.source].append(edge.target)
        if block.output not in ids:
            self.problem(f"{loc}.output", "is not a node of the block", received=block.output,
                         expected="the id of the node whose output the block returns",
                         fix="set output to the block's last node")
        for port in block.inputs:
            if not succs.get(port):
                self.problem(f"{loc}.inputs", f"the input {port} is not used by any node", received=port,
                             fix=f"connect {port} to a node of the block, or remove it from inputs")
        if block.output in ids:
            preds: dict[str, list[str]] = {n: [] for n in succs}
            for src, targets in succs.items():
                for t in targets:
                    preds[t].append(src)
            feeding = _reach(block.output, preds)
            fed = set().union(*(_reach(p, succs) for p in ports)) if ports else set()
            for node in block.nodes:
                if node.id not in feeding:
                    self.problem(f"{loc}.nodes[{node.id}]", "does not lead to the block's output: its result is "
                                 "never used", fix="connect it towards the output, or delete it")
                elif node.id not in fed:
                    self.problem(f"{loc}.nodes[{node.id}]", "is not connected to the block's inputs",
                                 fix="connect it to an input port or to a node after one")
        if len(self.problems) > before:
            self.broken.add(block.name)

    def _uses(self, block: BlockSpec) -> set[str]:
        return {n.op for n in block.nodes if n.op in self.blocks}

    def _recursion(self) -> None:
        """A block that uses itself, directly or through others, is refused with the cycle named."""
        state: dict[str, int] = {}  # 1 on the current path, 2 done
        reported: set[frozenset[str]] = set()
        for start in self.blocks:
            if state.get(start):
                continue
            path: list[str] = []
            stack: list[tuple[str, list[str]]] = [(start, sorted(self._uses(self.blocks[start])))]
            state[start] = 1
            path.append(start)
            while stack:
                name, todo = stack[-1]
                if not todo:
                    stack.pop()
                    path.pop()
                    state[name] = 2
                    continue
                nxt = todo.pop()
                if state.get(nxt) == 1:
                    cycle = path[path.index(nxt):]
                    if frozenset(cycle) not in reported:
                        reported.add(frozenset(cycle))
                        shown = " → ".join([*cycle, nxt])
                        for b in cycle:
                            self.problem(f"model.blocks[{b}]", "uses itself", received=shown,
                                         expected="blocks that do not use themselves, directly or through others",
                                         fix="replace the use that closes the cycle by the layers themselves")
                            self.broken.add(b)
                elif not state.get(nxt):
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append((nxt, sorted(self._uses(self.blocks[nxt]))))

    def _propagate_broken(self) -> None:
        changed = True
        while changed:
            changed = False
            for name, block in self.blocks.items():
                if name not in self.broken and self._uses(block) & self.broken:
                    self.broken.add(name)
                    changed = True

    # ------------------------------------------------------------------ uses

    def _top_level(self) -> None:
        model = self.spec.model
        expandable: dict[str, BlockSpec] = {}
        for node in model.nodes:
            block = self.blocks.get(node.op)
            if block is None:
                self.nodes.append(node)
            elif self._use_ok(node, block, f"model.nodes[{node.id}]", node.id) and block.name not in self.broken:
                expandable[node.id] = block
            else:
                self.nodes.append(node)  # opaque: the validator reports it and checks the rest
                self.opaque.add(node.id)
        incoming: dict[str, list[tuple[int | None, int, str, str]]] = {u: [] for u in expandable}
        for i, edge in enumerate(model.edges):
            source = self._output_of(edge.source, expandable)
            if edge.target in expandable:
                incoming[edge.target].append((edge.port, i, source, f"model.edges[{i}]"))
            else:
                self._edge(source, edge.target, edge.port, f"model.edges[{i}]")
        for node in model.nodes:
            if node.id in expandable:
                block = expandable[node.id]
                sources = self._ports(node.id, block, incoming[node.id], f"model.nodes[{node.id}]", node.id)
                if sources is None:
                    continue
                self.ports[node.id] = [src for src, _ in sources]
                self._expand(node.id, block, use_values(block, node.params), sources, node.id, ())
                self.outputs[node.id] = self._output_of(node.id, expandable)

    def _use_ok(self, node: NodeSpec, block: BlockSpec, loc: str, owner: str | None) -> bool:
        ok = True
        declared = {p.name: p for p in block.params}
        for key, value in node.params.items():
            prm = declared.get(key)
            if prm is None:
                self.problem(f"{loc}.params.{key}", f"block {block.name} has no such parameter", owner,
                             expected="one of: " + (", ".join(declared) or "none"), fix="remove it or check its spelling")
                ok = False
            elif param_reference(value) is None and not param_value_fits(prm.type, value):
                self.problem(f"{loc}.params.{key}", f"is not of the parameter's type ({prm.type})", owner,
                             received=repr(value)[:80], expected=f"a value of type {prm.type}")
                ok = False
        return ok

    def _ports(self, use: str, block: BlockSpec, edges: list[tuple[int | None, int, str, str]], loc: str,
               owner: str) -> list[tuple[str, str]] | None:
        """The (flat source, edge location) feeding each input port of the use, in port order."""
        if len(edges) != len(block.inputs):
            self.problem(f"{loc}.inputs", f"block {block.name} takes {len(block.inputs)} input(s) "
                         f"({', '.join(block.inputs)}) but {len(edges)} edge(s) come in", owner,
                         received=str(len(edges)), expected=str(len(block.inputs)),
                         fix="connect one edge per input port (set `port` on each when there are several)")
            return None
        ports = [p for p, _, _, _ in edges]
        if len(edges) > 1 and any(p is not None for p in ports) and \
                sorted(p if p is not None else -1 for p in ports) != list(range(len(edges))):
            self.problem(f"{loc}.inputs", "input ports must number the inputs 0, 1, … once each", owner,
                         received=str(ports), expected=str(list(range(len(edges)))))
            return None
        edges = sorted(edges, key=lambda e: (e[0] if e[0] is not None else 1 << 30, e[1]))
        return [(src, where) for _, _, src, where in edges]

    def _output_of(self, node_id: str, uses: dict[str, BlockSpec]) -> str:
        """The flat id of the node producing ``node_id``'s value (a use's block output, recursively)."""
        block = uses.get(node_id)
        while block is not None:
            node_id = flat_id(node_id, block.output)
            inner = next(n for n in block.nodes if n.id == block.output)
            block = self.blocks.get(inner.op)
        return node_id

    def _edge(self, source: str, target: str, port: int | None, location: str) -> None:
        self.edges.append(EdgeSpec(source=source, target=target, port=port))
        self.edge_locations.append(location)

    def _expand(self, prefix: str, block: BlockSpec, values: dict[str, Any], sources: list[tuple[str, str]],
                use: str, path: tuple[tuple[str, str], ...]) -> None:
        port_source = dict(zip(block.inputs, sources, strict=True))
        inner_uses = {n.id: self.blocks[n.op] for n in block.nodes if n.op in self.blocks}
        nested: dict[str, list[tuple[int | None, int, str, str]]] = {u: [] for u in inner_uses}
        where = Origin(use, path + ((block.name, "edges"),)).location
        for k, edge in enumerate(block.edges):
            if edge.source in port_source:
                source, _ = port_source[edge.source]
            else:
                inner_source = flat_id(prefix, edge.source)
                source = self._output_of(inner_source, {inner_source: inner_uses[edge.source]}) \
                    if edge.source in inner_uses else inner_source
            location = where(f"[{k}]")
            if edge.target in inner_uses:
                nested[edge.target].append((edge.port, k, source, location))
            else:
                self._edge(source, flat_id(prefix, edge.target), edge.port, location)
        for node in block.nodes:
            step = path + ((block.name, node.id),)
            params = {k: substitute(v, values) for k, v in node.params.items()}
            fid = flat_id(prefix, node.id)
            if node.id in inner_uses:
                inner = inner_uses[node.id]
                loc = Origin(use, step).location()
                resolved = NodeSpec(id=node.id, op=node.op, params=params)
                if not self._use_ok(resolved, inner, loc, use):
                    continue
                ports = self._ports(fid, inner, nested[node.id], loc, use)
                if ports is not None:
                    self._expand(fid, inner, use_values(inner, params), ports, use, step)
                continue
            self.nodes.append(NodeSpec(id=fid, op=node.op, params=params))
            self.origins[fid] = Origin(use, step)


def _reach(start: str, adj: dict[str, list[str]]) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in adj.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
