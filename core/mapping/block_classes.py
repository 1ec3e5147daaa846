"""One class per block in the generated programs (torchvision's way of writing a ResNet).

The validator expands every use of a block (:mod:`core.block_expansion`); the expanded graph stays
the validator's and the equivalence check's. The programs fold it back into one class per block,
written from the block's definition:

- the block's nodes go through the ordinary per-op converters once, with names local to the block
  (``conv1``) and the use's input ports as the tensors they read (``x``);
- every value the definition binds to a block parameter (``{"param": "channels"}``) and every size
  of an input port is a *symbol* (:mod:`core.mapping.symbols`) while they do: it holds one use's
  value, so the converters compute and branch as for that use, and it is written as the
  constructor argument's name (``nn.Conv2d(in_channels, channels, ...)``). A port's size that an op
  requires equal to another input's (the residual ``Add``, :meth:`~core.ops.registry.Op.equal_axes`)
  is written as that input's (``channels``), so a block whose input and output have the same
  channels takes them once;
- the constructor's arguments are the input sizes and block parameters its layers refer to (the
  parameters with their declared defaults), and each use is one layer
  ``self.layer1_0 = BasicBlock(channels=128)``.

A class is shared by the uses whose layers come out as the same code: a converter that writes
different code for different values (a stride of 1 and of 2 with 'same' padding) gives a class
each (``ConvBlock``, ``ConvBlock_2``), so no use runs code written for another. A block used inside
another block is written inline in the outer block's class (its layers are named
``<inner use>__<node>``, its parameters bound through the outer block's). Only generated
identifiers and :func:`literal` values reach the code: names are checked with
:func:`~core.mapping.base.ident`, and the block's description enters only as a string literal.
"""

from __future__ import annotations

import builtins
import heapq
import re
from collections.abc import Callable, Set
from dataclasses import dataclass, field, replace
from typing import Any

from core.block_expansion import param_reference, use_values
from core.mapping import naming
from core.mapping.base import ConvertContext, ConverterRegistry, MappedLayer, ident, literal
from core.mapping.symbols import Sym, keys_in, rename, resolve, symbol
from core.ops import REGISTRY as OPS
from core.spec import BlockSpec
from core.validate import Analysis, NodeInfo

PARAM_ANNOTATIONS = {"int": "int", "float": "float", "bool": "bool", "str": "str", "ints": "list[int]"}
# What a consumer reads of the layer that produced its input (Keras: the layout, and the shape a
# flattened channels-last tensor had): a use passes on its output layer's.
OUTPUT_EXTRA = ("layout", "flat_of")


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
                                 tensor_vars[node.id], mapped)
            mapped[node.id] = reg.get(node.op, node.id)(ctx)
        return mapped, ()
    view = top_level_view(analysis)
    top_vars = naming.layer_names(view, hooks.attributes)
    top_tensors = naming.chain_tensor_names(view, hooks.tensor_reserved,
                                            start_from=top_vars if hooks.tensors_from_layers else None)
    mapped = {}
    uses: dict[str, list[_Use]] = {}
    for node in view.nodes.values():
        ins = [mapped[s] for s in node.inputs]
        if node.id not in analysis.use_outputs:
            ctx = ConvertContext(analysis, analysis.nodes[node.id], ins, top_vars[node.id], top_tensors[node.id],
                                 mapped)
            mapped[node.id] = reg.get(node.op, node.id)(ctx)
            continue
        names = _use_names(analysis, hooks, node.id)
        inner = _map_members(analysis, hooks, names, ins)
        uses.setdefault(node.op, []).append(_Use(node.id, names, _map_members(_symbolic(analysis, names), hooks,
                                                                               names, ins)))
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
        groups: dict[tuple[Any, ...], list[_Use]] = {}
        for use in block_uses:  # uses written as the same code share a class
            groups.setdefault(use.code, []).append(use)
        for group in groups.values():
            cls = _block_class(block, group, hooks, analysis, _class_name(block_name, taken))
            classes.append(cls)
            for i, use in enumerate(group):
                mapped[use.id] = replace(mapped[use.id], ctor=cls.instantiate(i))
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


@dataclass(frozen=True)
class _Names:
    """How one use's layers are named in its block's class."""

    use: str
    members: tuple[NodeInfo, ...]  # its expanded nodes, in the block's declared order where it can
    local: dict[str, str]  # expanded id -> id inside the block ("conv1", "inner__conv1" when nested)
    var: dict[str, str]
    out: dict[str, str]
    ports: tuple[str, ...]  # forward's tensor arguments
    sources: tuple[str, ...]  # the expanded node each port reads


@dataclass(frozen=True)
class _Use:
    id: str
    names: _Names
    written: list[tuple[str, MappedLayer]]  # the class's layers, symbols as markers

    @property
    def code(self) -> tuple[Any, ...]:
        return (self.names.ports, tuple((lid, layer.var, layer.out, layer.ctor, layer.forward)
                                        for lid, layer in self.written))


def _use_names(analysis: Analysis, hooks: Hooks, use: str) -> _Names:
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
    port_of: dict[str, str] = {}
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
    return _Names(use, tuple(members), local, var, out, tuple(port_names), tuple(sources))


def _map_members(analysis: Analysis, hooks: Hooks, names: _Names, ins: list[MappedLayer]
                 ) -> list[tuple[str, MappedLayer]]:
    """The use's layers by the ordinary converters: ``analysis`` is the validator's (the use's own
    values, for the model's weights and lines) or :func:`_symbolic` (the class's code)."""
    port_of: dict[str, str] = {}
    for name, source in zip(names.ports, names.sources, strict=True):
        port_of.setdefault(source, name)
    stubs = {s: replace(layer, out=port_of[s], forward=port_of[s]) for s, layer in zip(names.sources, ins,
                                                                                         strict=True)}
    mapped: dict[str, MappedLayer] = {}
    result: list[tuple[str, MappedLayer]] = []
    for member in names.members:
        n = analysis.nodes[member.id]
        inputs = [mapped[s] if s in mapped else stubs[s] for s in n.inputs]
        ctx = ConvertContext(analysis, n, inputs, names.var[n.id], names.out[n.id])
        layer = hooks.registry.get(n.op, n.id)(ctx)
        mapped[n.id] = layer
        result.append((names.local[n.id], layer))
    return result


def _symbolic(analysis: Analysis, names: _Names) -> Analysis:
    """The analysis as the block's definition sees one use: values bound to block parameters and the
    input ports' sizes are symbols (:mod:`core.mapping.symbols`), shapes inferred again from them.

    Symbol keys: ``param:<name>`` for a block parameter, ``port:<i>:<axis>`` for a port's size. A
    port size an op needs equal to another input's (:meth:`~core.ops.registry.Op.equal_axes`) is
    renamed to that input's, and the shapes inferred again, until nothing more is learnt."""
    renames: dict[str, tuple[tuple[str, ...], int]] = {}
    for _ in range(1 + sum(len(analysis.nodes[s].output.shape) for s in names.sources)):
        nodes = dict(analysis.nodes)
        for i, source in enumerate(names.sources):
            if names.sources.index(source) != i:
                continue  # a source feeding two ports: its sizes are the first port's
            info = analysis.nodes[source]
            shape = rename(tuple(Sym(d, (f"port:{i}:{a}",)) for a, d in enumerate(info.output.shape)), renames)
            nodes[source] = replace(info, output=replace(info.output, shape=shape))
        learnt = False
        for member in names.members:
            op = OPS.get(member.op)
            params = {k: _bound(analysis, names.use, member.id, k, v) for k, v in member.params.items()}
            ins = [nodes[s].output for s in member.inputs]
            nodes[member.id] = replace(member, params=params,
                                       output=replace(member.output, shape=op.infer(ins, params).shape))
            rank = len(ins[0].shape) if ins else 0
            for axis in op.equal_axes(params, rank) if len(ins) > 1 else ():
                sizes = [t.shape[axis] for t in ins if len(t.shape) == rank]
                learnt = any([_unify(a, b, renames) for a in sizes for b in sizes]) or learnt
        if not learnt:
            return replace(analysis, nodes=nodes)
    raise AssertionError(f"the sizes of use {names.use}'s ports did not settle")  # each round renames one


def _unify(a: Any, b: Any, renames: dict[str, tuple[tuple[str, ...], int]]) -> bool:
    """Learn that port size ``b`` is ``a`` (sizes an op requires equal); True when that is news."""
    if not (isinstance(a, Sym) and isinstance(b, Sym)) or (a.keys, a.coef) == (b.keys, b.coef):
        return False
    if len(b.keys) != 1 or b.coef != 1 or not b.keys[0].startswith("port:") or b.keys[0] in a.keys:
        return False
    if len(a.keys) == 1 and a.coef == 1 and a.keys[0].startswith("port:") and a.keys[0] > b.keys[0]:
        return False  # two port sizes: the later port's becomes the earlier's (the other pair does it)
    renames[b.keys[0]] = (a.keys, a.coef)
    return True


def _bound(analysis: Analysis, use: str, flat_id: str, key: str, value: Any) -> Any:
    """An inner node's parameter value, as a symbol where the block's definition binds it to one of
    the use's block parameters (through the blocks it is nested in), else the value itself."""
    path = analysis.origins[flat_id].path
    blocks = {b.name: b for b in analysis.spec.model.blocks}
    raw = _node(blocks[path[-1][0]], path[-1][1]).params.get(key)

    def top(raw: Any) -> str | None:
        """The use's block parameter a reference at the innermost level stands for, if any."""
        for depth in range(len(path) - 1, -1, -1):
            ref = param_reference(raw)
            if ref is None:
                return None
            if depth == 0:
                return ref
            raw = _node(blocks[path[depth - 1][0]], path[depth - 1][1]).params.get(ref)
        return None

    outer = blocks[path[0][0]]
    given = use_values(outer, analysis.spec.node(use).params)

    def wrap(raw: Any, value: Any) -> Any:
        p = top(raw)
        if p is not None:
            pv = given[p]
            if _same(value, pv):
                return symbol(value, f"param:{p}")
            if isinstance(value, (tuple, list)) and value and all(_same(v, pv) for v in value):
                return type(value)(symbol(v, f"param:{p}") for v in value)  # a bound int as a pair
            return value
        if isinstance(raw, list) and isinstance(value, (tuple, list)) and len(raw) == len(value):
            return type(value)(wrap(r, v) for r, v in zip(raw, value, strict=True))
        return value

    return wrap(raw, value)


def _node(block: BlockSpec, node_id: str) -> Any:
    return next(n for n in block.nodes if n.id == node_id)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


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


def _class_name(block: str, taken: set[str]) -> str:
    camel = "".join(part[:1].upper() + part[1:] for part in block.split("_") if part) or "Block"
    if camel[0].isdigit():
        camel = f"Block{camel}"
    return naming.unique(camel, taken, frozenset(dir(builtins)))


_AXES = {3: ("channels", "height", "width"), 2: ("length", "features"), 1: ("features",)}


def _block_class(block: BlockSpec, group: list[_Use], hooks: Hooks, analysis: Analysis, name: str) -> BlockClass:
    """The class of a group of uses written as the same code: its arguments are the symbols that
    code refers to — the input ports' sizes first (torchvision's inplanes), then the block's
    parameters in their declared order, with their declared defaults."""
    first = group[0]
    ports = first.names.ports
    written = first.written
    used: dict[str, bool] = {}  # symbol key -> read in forward (kept as self.<name>)
    for _, layer in written:
        for k in keys_in(layer.ctor):
            used.setdefault(k, False)
        for k in keys_in(layer.forward):
            used[k] = True
    params = {p.name: p for p in block.params}
    keys = sorted((k for k in used if k.startswith("port:")), key=lambda k: tuple(map(int, k.split(":")[1:]))) + \
        [f"param:{p}" for p in params if f"param:{p}" in used]
    reserved = set(hooks.tensor_reserved) | set(hooks.attributes) | set(hooks.module_names) | set(ports) | \
        {layer.var for _, layer in written} | {layer.out for _, layer in written}
    taken: set[str] = set()
    arg_name: dict[str, str] = {}
    for k in [k for k in keys if k.startswith("param:")] + [k for k in keys if k.startswith("port:")]:
        arg_name[k] = naming.unique(ident(k.split(":", 1)[1]) if k.startswith("param:") else
                                    _port_arg(k, ports, len(analysis.nodes[first.names.sources[int(k.split(":")[1])]]
                                                            .output.shape)),
                                    taken, reserved)
    args = []
    for k in keys:
        if k.startswith("param:"):
            p = params[k.split(":", 1)[1]]
            values = tuple(use_values(block, analysis.spec.node(u.id).params)[p.name] for u in group)
            args.append(Arg(arg_name[k], PARAM_ANNOTATIONS[p.type], literal(p.default), values, used[k]))
        else:
            i, axis = map(int, k.split(":")[1:])
            values = tuple(analysis.nodes[u.names.sources[i]].output.shape[axis] for u in group)
            args.append(Arg(arg_name[k], "int", None, values, used[k]))
    layers = []
    for inner_id, layer in written:
        ctor = resolve(layer.ctor, lambda k: arg_name[k]) if layer.ctor is not None else None
        forward = resolve(layer.forward, lambda k: f"self.{arg_name[k]}")
        if not re.fullmatch(r"[^\n]*", forward) or (ctor is not None and not re.fullmatch(r"[^\n]*", ctor)):
            raise ValueError(f"generated expression spans lines: {ctor!r} / {forward!r}")
        layers.append(replace(layer, node_id=inner_id, ctor=ctor, forward=forward, comment=f"{inner_id} ({layer.op})"))
    output = next(layer.out for _, layer in written if layer.node_id == analysis.use_outputs[first.id])
    doc = literal(block.description) if block.description else ""
    return BlockClass(name=ident(name), block=block.name, doc=doc, args=tuple(args), inputs=tuple(ports),
                      layers=tuple(layers), output=output, uses=tuple(u.id for u in group))


def _port_arg(key: str, ports: tuple[str, ...], rank: int) -> str:
    """``in_channels`` for a size of the first port, ``<port>_channels`` for another's."""
    i, axis = map(int, key.split(":")[1:])
    axis_name = _AXES[rank][axis] if rank in _AXES else f"dim{axis}"
    return f"in_{axis_name}" if i == 0 else f"{naming.sanitise(ports[i])}_{axis_name}"


def rebase_weights(layer: MappedLayer, use_var: str) -> MappedLayer:
    """An inner layer's weight bindings as seen from the model: ``conv1.weight`` → ``layer1_0.conv1.weight``."""
    return replace(layer, weights=tuple(replace(w, target=f"{ident(use_var)}.{w.target}") for w in layer.weights))


def rebase_lines(layer: MappedLayer, use_var: str) -> MappedLayer:
    """:func:`rebase_weights`, and the layer's ``model.<var>.`` in its load/save lines (Keras)."""
    pattern = re.compile(rf"\bmodel\.{re.escape(ident(layer.var))}\.")
    moved = {key: [pattern.sub(f"model.{ident(use_var)}.{layer.var}.", line) for line in layer.extra.get(key, ())]
             for key in ("load_lines", "save_lines")}
    return replace(rebase_weights(layer, use_var), extra={**layer.extra, **moved})
