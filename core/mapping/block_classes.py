"""One class per block in the generated programs (torchvision's way of writing a ResNet).

The validator expands every use of a block (:mod:`core.block_expansion`), so each inner node of each use is
an ordinary node with concrete parameters and shapes, and the framework's converters map it as
usual. :func:`map_graph` then folds the uses back:

- the inner layers of a block are mapped once per use, with names local to the block (``conv1``),
  the use's input ports as the tensors they read (``x``);
- the constructor and forward expressions of all uses are parsed (:mod:`ast`) and compared: a value
  that differs between uses, or that is the value of a block parameter the node refers to, becomes
  a constructor argument — the block parameter's own name where the values are that parameter's
  (``channels``), ``in_channels``-style names where they are an input's size, else
  ``<layer>_<keyword>``; the rest stay literals. Substituting a name only where its value is
  equal in every use keeps each use's layers exactly what the converters wrote;
- the block becomes a class whose constructor takes those arguments (block parameters default to
  their declared defaults) and each use one layer ``self.layer1_0 = BasicBlock(channels=128, ...)``.

Uses whose layers differ in form (not only in values) get a class each (``BasicBlock``,
``BasicBlock_2``). A block used inside another block is written inline in the outer block's class
(its layers are named ``<inner use>__<node>``). Only generated identifiers and :func:`literal`
values reach the code: names are checked with :func:`~core.mapping.base.ident`, and the block's
description enters only as a string literal.
"""

from __future__ import annotations

import ast
import builtins
import heapq
import re
from collections.abc import Callable, Set
from dataclasses import dataclass, field, replace
from typing import Any

from core.mapping import naming
from core.mapping.base import ConvertContext, ConverterRegistry, MappedLayer, ident, literal
from core.spec import BlockSpec
from core.validate import Analysis, NodeInfo

PARAM_ANNOTATIONS = {"int": "int", "float": "float", "bool": "bool", "str": "str", "ints": "list[int]"}
# What a consumer reads of the layer that produced its input (Keras: the layout, and the shape a
# flattened channels-last tensor had): a use passes on its output layer's.
OUTPUT_EXTRA = ("layout", "flat_of")
_TRIVIAL = (0, 1, -1)


@dataclass(frozen=True)
class Arg:
    name: str
    annotation: str
    default: str | None  # a literal, or None for a required argument
    values: tuple[Any, ...]  # per use of the class, in use order
    stored: bool = False  # also kept as ``self.<name>`` (a forward expression reads it)


@dataclass(frozen=True)
class BlockClass:
    """What the template writes for one class: its constructor arguments, layers and forward."""

    name: str
    block: str
    doc: str  # a string literal (the block's description), or "" for none
    args: tuple[Arg, ...]
    inputs: tuple[str, ...]  # forward's tensor arguments
    layers: tuple[MappedLayer, ...]
    output: str
    uses: tuple[str, ...]

    @property
    def signature(self) -> str:
        required = [a for a in self.args if a.default is None]
        optional = [a for a in self.args if a.default is not None]
        return ", ".join([f"{a.name}: {a.annotation}" for a in required] +
                         [f"{a.name}: {a.annotation} = {a.default}" for a in optional])

    def instantiate(self, use_index: int) -> str:
        return f"{self.name}(" + ", ".join(f"{a.name}={literal(a.values[use_index])}" for a in self.args) + ")"

    @property
    def config(self) -> str:
        """``"channels": self.channels, …``: the constructor arguments, for Keras' get_config."""
        return ", ".join(f"{literal(a.name)}: self.{a.name}" for a in self.args)


@dataclass
class Hooks:
    """What differs between the frameworks."""

    framework: str
    registry: ConverterRegistry
    attributes: Set[str]  # names a layer attribute must not take (the base class's, the module's)
    tensor_reserved: Set[str]
    use_forward: Callable[[str, list[str]], str]  # (layer attribute, input tensors) -> forward expression
    rebase: Callable[[MappedLayer, str], MappedLayer]  # an inner layer as seen from the model (weights)
    tensors_from_layers: bool = False  # Keras names a new tensor after its layer
    module_names: Set[str] = field(default_factory=frozenset)


def map_graph(analysis: Analysis, hooks: Hooks, layer_vars: dict[str, str], tensor_vars: dict[str, str]
              ) -> tuple[dict[str, MappedLayer], tuple[BlockClass, ...]]:
    """Every top-level node's MappedLayer (a use: one layer holding its block's class) and the classes.

    Without blocks this is exactly the per-node mapping every mapper did before blocks existed."""
    reg = hooks.registry
    if not analysis.origins:
        mapped: dict[str, MappedLayer] = {}
        for node in analysis.nodes.values():
            ctx = ConvertContext(analysis, node, [mapped[s] for s in node.inputs], layer_vars[node.id],
                                 tensor_vars[node.id])
            mapped[node.id] = reg.get(node.op, node.id)(ctx)
        return mapped, ()
    view = top_level_view(analysis)
    top_vars = naming.layer_names(view, hooks.attributes)
    top_tensors = naming.chain_tensor_names(view, hooks.tensor_reserved,
                                            start_from=top_vars if hooks.tensors_from_layers else None)
    mapped = {}
    uses: dict[str, list[tuple[str, list[tuple[str, MappedLayer]], list[str]]]] = {}
    for node in view.nodes.values():
        ins = [mapped[s] for s in node.inputs]
        if node.id not in analysis.use_outputs:
            ctx = ConvertContext(analysis, analysis.nodes[node.id], ins, top_vars[node.id], top_tensors[node.id])
            mapped[node.id] = reg.get(node.op, node.id)(ctx)
            continue
        inner, ports = _map_use(analysis, hooks, node.id, ins)
        uses.setdefault(node.op, []).append((node.id, inner, ports))
        helpers = sorted({h for _, layer in inner for h in layer.extra.get("helpers", ())})
        last = next(layer for _, layer in inner if layer.node_id == analysis.use_outputs[node.id])
        rebased = [hooks.rebase(layer, top_vars[node.id]) for _, layer in inner]
        mapped[node.id] = MappedLayer(
            node_id=node.id, op=node.op, var=top_vars[node.id], out=top_tensors[node.id], ctor=None,
            forward=hooks.use_forward(top_vars[node.id], [i.out for i in ins]),
            comment=f"node {node.id} ({node.op}) -> " + "x".join(map(str, node.output.shape)),
            weights=tuple(w for layer in rebased for w in layer.weights),
            extra={"helpers": tuple(helpers), "is_input": False, "is_output": False, "training": True,
                   **{k: v for k, v in last.extra.items() if k in OUTPUT_EXTRA},
                   "load_lines": [x for layer in rebased for x in layer.extra.get("load_lines", ())],
                   "save_lines": [x for layer in rebased for x in layer.extra.get("save_lines", ())]})
    classes: list[BlockClass] = []
    taken = set(hooks.module_names) | set(hooks.attributes)
    for block_name, block_uses in uses.items():
        block = analysis.spec.model.block(block_name)
        assert block is not None
        for group in _groups(block_uses):
            cls = _block_class(block, group, hooks, analysis, _class_name(block_name, taken))
            classes.append(cls)
            for i, (use, _, _) in enumerate(group):
                mapped[use] = replace(mapped[use], ctor=cls.instantiate(i))
    return mapped, tuple(classes)


def top_level_view(analysis: Analysis) -> Analysis:
    """The graph as drawn: top-level nodes, each use one node (its output shape, its ports' sources)."""
    nodes: dict[str, NodeInfo] = {}
    to_use = {flat: use for use, flat in analysis.use_outputs.items()}
    for node in analysis.nodes.values():
        origin = analysis.origins.get(node.id)
        if origin is None:
            nodes[node.id] = replace(node, inputs=tuple(to_use.get(s, s) for s in node.inputs))
        elif origin.use not in nodes and origin.use in analysis.uses:
            info = analysis.uses[origin.use]
            nodes[origin.use] = replace(info, inputs=tuple(to_use.get(s, s) for s in analysis.use_ports[origin.use]))
    # A use sits where its first inner node was; a later port's source may come after that, so
    # order the view again (Kahn, keeping the expanded graph's order where it can).
    rank = {node_id: i for i, node_id in enumerate(nodes)}
    waiting = {n.id: len(n.inputs) for n in nodes.values()}
    users: dict[str, list[str]] = {}
    for n in nodes.values():
        for src in n.inputs:
            users.setdefault(src, []).append(n.id)
    ready = [(rank[i], i) for i, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    ordered: dict[str, NodeInfo] = {}
    while ready:
        _, node_id = heapq.heappop(ready)
        ordered[node_id] = nodes[node_id]
        for user in users.get(node_id, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (rank[user], user))
    return replace(analysis, nodes=ordered, origins={}, use_outputs={})


def _map_use(analysis: Analysis, hooks: Hooks, use: str, ins: list[MappedLayer]
             ) -> tuple[list[tuple[str, MappedLayer]], list[str]]:
    """The inner layers of one use, named as in its block's class; and the class's input names."""
    block = analysis.spec.model.block(analysis.spec.node(use).op)
    assert block is not None
    members = _declared_order(analysis, [n for n in analysis.nodes.values()
                                         if (o := analysis.origins.get(n.id)) is not None and o.use == use])
    local = {n.id: "__".join(step for _, step in analysis.origins[n.id].path) for n in members}
    reserved = set(hooks.attributes) | set(hooks.module_names)
    taken: set[str] = set()
    var = {n.id: naming.unique(naming.sanitise(local[n.id]), taken, reserved) for n in members}
    port_names: list[str] = []
    tensor_taken: set[str] = set()
    # Locals of the class's forward: they must not hide the module's names, builtins or its arguments.
    local_reserved = set(hooks.module_names) | set(dir(builtins)) | {"self", "training"}
    for port in block.inputs:
        port_names.append(naming.unique(naming.sanitise(port), tensor_taken, local_reserved))
    sources = analysis.use_ports[use]
    port_of = {}
    for name, source in zip(port_names, sources, strict=True):
        port_of.setdefault(source, name)
    consumers: dict[str, int] = {}
    for n in members:
        for s in n.inputs:
            consumers[s] = consumers.get(s, 0) + 1
    out: dict[str, str] = {}
    for n in members:
        if len(n.inputs) == 1 and consumers[n.inputs[0]] == 1:
            src = n.inputs[0]
            out[n.id] = out[src] if src in out else port_of[src]
        else:
            base = var[n.id] if hooks.tensors_from_layers else naming.sanitise(local[n.id])
            out[n.id] = naming.unique(base, tensor_taken, local_reserved | set(port_names))
    stubs = {s: replace(layer, out=port_of[s], forward=port_of[s]) for s, layer in zip(sources, ins, strict=True)}
    mapped: dict[str, MappedLayer] = {}
    result: list[tuple[str, MappedLayer]] = []
    for n in members:
        inputs = [mapped[s] if s in mapped else stubs[s] for s in n.inputs]
        ctx = ConvertContext(analysis, n, inputs, var[n.id], out[n.id])
        layer = hooks.registry.get(n.op, n.id)(ctx)
        mapped[n.id] = layer
        result.append((local[n.id], layer))
    return result, port_names


def _declared_order(analysis: Analysis, members: list[NodeInfo]) -> list[NodeInfo]:
    """The use's nodes in a topological order that keeps the block's own node order where it can
    (the class then reads as the block was drawn: conv1, bn1, relu1, conv2, …)."""
    blocks = {b.name: b for b in analysis.spec.model.blocks}

    def rank(node_id: str) -> tuple[int, ...]:
        return tuple(next(i for i, n in enumerate(blocks[b].nodes) if n.id == inner)
                     for b, inner in analysis.origins[node_id].path)

    inside = {n.id: n for n in members}
    waiting = {n.id: sum(1 for s in n.inputs if s in inside) for n in members}
    users: dict[str, list[str]] = {}
    for n in members:
        for src in n.inputs:
            if src in inside:
                users.setdefault(src, []).append(n.id)
    ready = [(rank(i), i) for i, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    order: list[NodeInfo] = []
    while ready:
        _, node_id = heapq.heappop(ready)
        order.append(inside[node_id])
        for user in users.get(node_id, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (rank(user), user))
    return order


def _skeleton(code: str | None) -> str:
    if code is None:
        return ""
    tree = ast.parse(code, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            node.value = None
    return ast.dump(tree)


def _groups(uses: list[tuple[str, list[tuple[str, MappedLayer]], list[str]]]
            ) -> list[list[tuple[str, list[tuple[str, MappedLayer]], list[str]]]]:
    """Uses whose layers have the same form (names, expressions up to their values) share a class."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for use in uses:
        _, inner, ports = use
        key = (tuple(ports), tuple((lid, layer.var, layer.out, _skeleton(layer.ctor), _skeleton(layer.forward))
                                   for lid, layer in inner))
        groups.setdefault(key, []).append(use)
    return list(groups.values())


def _class_name(block: str, taken: set[str]) -> str:
    camel = "".join(part[:1].upper() + part[1:] for part in block.split("_") if part) or "Block"
    if camel[0].isdigit():
        camel = f"Block{camel}"
    return naming.unique(camel, taken, frozenset(dir(builtins)))


def _keyword_of(tree: ast.AST) -> dict[int, str]:
    """id(constant) -> the name a value in that position gets: ``<keyword>`` or ``<function>``."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, label: str) -> None:
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "call")
            for i, arg in enumerate(node.args):
                visit(arg, "fan_in" if func == "torch_uniform" else f"{func.lower()}_{i}")
            for kw in node.keywords:
                visit(kw.value, kw.arg or label)
            return
        if isinstance(node, ast.Constant):
            names[id(node)] = label
        for child in ast.iter_child_nodes(node):
            visit(child, label)

    visit(tree, "value")
    return names


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _block_class(block: BlockSpec, group: list[tuple[str, list[tuple[str, MappedLayer]], list[str]]],
                 hooks: Hooks, analysis: Analysis, name: str) -> BlockClass:
    use_ids = [u for u, _, _ in group]
    params = {p.name: p for p in block.params}
    values = [{p: analysis.spec.node(u).params.get(p, params[p].default) for p in params} for u in use_ids]
    ports = group[0][2]
    in_shapes = [[analysis.nodes[s].output.shape if s in analysis.nodes else () for s in analysis.use_ports[u]]
                 for u in use_ids]
    refs = {n.id: {r for v in n.params.values() for r in _refs(v)} for n in block.nodes}
    # Values a constant of an inner node may stand for besides a block parameter: its other
    # parameters (given or default) and its inputs' sizes. A value equal to one of them is only named
    # after the parameter when it differs between uses (kernel_size 3 is not `channels` = 3).
    others: dict[str, set[Any]] = {}
    for lid, layer in group[0][1]:
        raw = next((n for n in block.nodes if n.id == lid), None)
        flat = analysis.nodes[layer.node_id]
        values_seen: set[Any] = {d for s in flat.inputs for d in analysis.nodes[s].output.shape}
        for key, value in flat.params.items():
            if raw is None or not _refs(raw.params.get(key)):
                values_seen |= set(value) if isinstance(value, (tuple, list)) else {value}
        others[lid] = {v for v in values_seen if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    reserved = set(hooks.tensor_reserved) | set(hooks.attributes) | set(hooks.module_names) | set(ports) | \
        {layer.var for _, layer in group[0][1]} | {layer.out for _, layer in group[0][1]}
    taken: set[str] = set()
    arg_names: dict[str, str] = {}  # block param -> argument name
    args: dict[tuple[Any, ...], Arg] = {}  # per-use value vector -> argument

    def add(key: tuple[Any, ...], arg: Arg, stored: bool) -> str:
        prev = args.get(key, arg)
        args[key] = replace(prev, stored=prev.stored or stored)
        return prev.name

    def param_arg(p: str, stored: bool) -> str:
        if p not in arg_names:
            arg_names[p] = naming.unique(ident(p), taken, reserved)
        pv = tuple(vals[p] for vals in values)
        return add(("param", p), Arg(arg_names[p], PARAM_ANNOTATIONS[params[p].type], literal(params[p].default), pv),
                   stored)

    def argument(vector: tuple[Any, ...], label: str, var: str, inner_id: str, stored: bool) -> tuple[str, int] | None:
        """(argument, factor) whose product is the constant in every use, or None to keep the literal."""
        varies = any(not _same(v, vector[0]) for v in vector)
        own = refs.get(inner_id.split("__")[0], set())
        for p in params:  # a block parameter's own values
            pv = tuple(vals[p] for vals in values)
            if all(_same(a, b) for a, b in zip(vector, pv, strict=True)) and \
                    (varies or (p in own and vector[0] not in _TRIVIAL and vector[0] not in others[inner_id])):
                return param_arg(p, stored), 1
        if not varies:
            return None
        for p in params:  # a multiple of one (a fan-in: channels × 9)
            pv = tuple(vals[p] for vals in values)
            k = _factor(vector, pv)
            if k is not None:
                return param_arg(p, stored), k
        for name, sizes in _shape_candidates(in_shapes, ports):  # an input's size, or a multiple of it
            k = _factor(vector, sizes)
            if k is not None:
                return add(("shape", name), Arg(naming.unique(name, taken, reserved) if ("shape", name) not in args
                                                else args[("shape", name)].name, "int", None, sizes), stored), k
        kinds = {type(v) for v in vector}
        annotation = kinds.pop().__name__ if len(kinds) == 1 and type(vector[0]) in (int, float, bool, str) else "object"
        arg = Arg(naming.unique(naming.sanitise(f"{var}_{label}"), taken, reserved) if vector not in args else "",
                  annotation, None, vector)
        return add(vector, arg, stored), 1

    layers: list[MappedLayer] = []
    for i, (inner_id, first) in enumerate(group[0][1]):
        per_use = [inner[i][1] for _, inner, _ in group]
        ctor = _rewrite([lay.ctor for lay in per_use], argument, first.var, inner_id, False)
        forward = _rewrite([lay.forward for lay in per_use], argument, first.var, inner_id, True)
        layers.append(replace(first, node_id=inner_id, ctor=ctor, forward=forward or first.forward,
                              comment=f"{inner_id} ({first.op})"))
    output_flat = analysis.use_outputs[use_ids[0]]
    output = next(layer.out for _, layer in group[0][1] if layer.node_id == output_flat)
    doc = literal(block.description) if block.description else ""
    order = list(params)

    def position(item: tuple[tuple[Any, ...], Arg]) -> tuple[int, int]:
        key, _ = item  # inputs' sizes first (torchvision's inplanes), then the block's params, then the rest
        if key[0] == "shape":
            return (0, 0)
        return (1, order.index(key[1])) if key[0] == "param" else (2, 0)

    ordered = tuple(arg for _, arg in sorted(args.items(), key=position))
    return BlockClass(name=ident(name), block=block.name, doc=doc, args=ordered, inputs=tuple(ports),
                      layers=tuple(layers), output=output, uses=tuple(use_ids))


def _refs(value: Any) -> list[str]:
    from core.block_expansion import references

    return references(value)


def _shape_candidates(in_shapes: list[list[tuple[int, ...]]], ports: list[str]) -> list[tuple[str, tuple[int, ...]]]:
    """``(in_channels, per-use sizes)`` for every axis of every input port (same rank in every use)."""
    found = []
    axes = {3: ("channels", "height", "width"), 2: ("length", "features"), 1: ("features",)}
    for p, port in enumerate(ports):
        ranks = {len(shapes[p]) for shapes in in_shapes if len(shapes) > p}
        if len(ranks) != 1:
            continue
        rank = ranks.pop()
        for axis in range(rank):
            axis_name = axes[rank][axis] if rank in axes else f"dim{axis}"
            found.append((f"in_{axis_name}" if p == 0 else f"{naming.sanitise(port)}_{axis_name}",
                          tuple(shapes[p][axis] for shapes in in_shapes)))
    return found


def _factor(vector: tuple[Any, ...], base: tuple[Any, ...]) -> int | None:
    """k when ``vector`` is ``k × base`` in every use (positive integers only), else None."""
    if not all(type(v) is int and type(b) is int and b > 0 for v, b in zip(vector, base, strict=True)):
        return None
    if vector[0] % base[0]:
        return None
    k = vector[0] // base[0]
    return k if k > 0 and all(v == k * b for v, b in zip(vector, base, strict=True)) else None


def _rewrite(codes: list[str | None], argument: Callable[..., tuple[str, int] | None], var: str, inner_id: str,
             in_forward: bool) -> str | None:
    """The first use's expression with the constants that became arguments replaced by their names
    (``self.<name>`` in forward)."""
    if codes[0] is None:
        return None
    trees = [ast.parse(code or "", mode="eval") for code in codes]
    labels = _keyword_of(trees[0])
    constants = [[n for n in ast.walk(t) if isinstance(n, ast.Constant)] for t in trees]
    changed = False
    for k, node in enumerate(constants[0]):
        vector = tuple(c[k].value for c in constants)
        found = argument(vector, labels.get(id(node), "value"), var, inner_id, in_forward)
        if found is None:
            continue
        name, factor = found
        changed = True
        replacement: ast.expr = ast.Attribute(ast.Name("self", ast.Load()), name, ast.Load()) if in_forward \
            else ast.Name(name, ast.Load())
        if factor != 1:
            replacement = ast.BinOp(replacement, ast.Mult(), ast.Constant(factor))
        _replace(trees[0], node, replacement)
    if not changed:
        return codes[0]
    code = ast.unparse(trees[0])
    if not re.fullmatch(r"[^\n]*", code):
        raise ValueError(f"generated expression spans lines: {code!r}")
    return code


def _replace(tree: ast.AST, old: ast.AST, new: ast.expr) -> None:
    for parent in ast.walk(tree):
        for fname, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, fname, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


def rebase_weights(layer: MappedLayer, use_var: str) -> MappedLayer:
    """An inner layer's weight bindings as seen from the model: ``conv1.weight`` → ``layer1_0.conv1.weight``."""
    return replace(layer, weights=tuple(replace(w, target=f"{ident(use_var)}.{w.target}") for w in layer.weights))


def rebase_lines(layer: MappedLayer, use_var: str) -> MappedLayer:
    """:func:`rebase_weights`, and the layer's ``model.<var>.`` in its load/save lines (Keras)."""
    pattern = re.compile(rf"\bmodel\.{re.escape(ident(layer.var))}\.")
    moved = {key: [pattern.sub(f"model.{ident(use_var)}.{layer.var}.", line) for line in layer.extra.get(key, ())]
             for key in ("load_lines", "save_lines")}
    return replace(rebase_weights(layer, use_var), extra={**layer.extra, **moved})
