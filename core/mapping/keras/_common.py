"""Shared pieces of the Keras converters: the registry, tensor layouts and weight bindings.

Keras runs channels-last (its channels-first Conv2D does not run eagerly on CPU), so the
mapper tracks, for every tensor in the generated ``call``, how its Keras array relates to
the logical (channels-first) shape the op catalogue infers:

``canon``
    the Keras array has the logical layout (vectors, sequences (T, F), token ids, and the
    output of a Reshape).
``cl``
    channels-last: logical axis 0 (the channels) is the last Keras axis — images
    (C, H, W) are held as (H, W, C), signals (C, L) as (L, C).
``flat_cl``
    a vector that is the flatten of a ``cl`` tensor of logical shape ``flat_of``. A Linear
    reading it gets its weight rows permuted when canonical weights are loaded, so the
    network never pays for a transpose before Flatten; anything else converts it back.

A converter asks for its inputs in the layout it needs (:func:`take`), which inserts
``ops.transpose``/``channels_first_flat`` only where the layouts differ, and declares the
layout it produces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, WeightBinding, call, converters, ident, literal
from core.weights import node_shapes, node_weights

register = converters("keras").register

CANON, CL, FLAT_CL = "canon", "cl", "flat_cl"


@dataclass(frozen=True)
class KerasWeight:
    """One Keras variable and how canonical arrays fill it (and are read back from it).

    ``path`` is relative to the node's layer attribute (``kernel``, ``cell.bias``…);
    ``load`` is code over ``a`` (the dict of canonical arrays); each ``save`` entry is a
    canonical name and code over ``{v}`` (the variable's numpy value, substituted by :func:`layer`).
    """

    path: str
    load: str
    save: tuple[tuple[str, str], ...]
    transform: str = "identity"  # the conversion's name, for WeightBinding


def key(ctx: ConvertContext, name: str) -> str:
    return f"{ctx.node.id}/{name}"


def arr(ctx: ConvertContext, name: str) -> str:
    """Code reading one canonical array: ``a['conv1/weight']``."""
    return f"a[{literal(key(ctx, name))}]"


def weight(ctx: ConvertContext, path: str, name: str, to_keras: str = "", to_canon: str = "") -> KerasWeight:
    """A variable filled from one canonical array through the named conversion function(s)."""
    load = f"{to_keras}({arr(ctx, name)})" if to_keras else arr(ctx, name)
    save = f"{to_canon}({{v}})" if to_canon else "{v}"
    return KerasWeight(path, load, ((key(ctx, name), save),), to_keras or "identity")


def layout_of(layer: MappedLayer) -> str:
    return str(layer.extra.get("layout", CANON))


def _perm_to_canon(rank: int) -> tuple[int, ...]:
    """Transpose of a batched channels-last tensor of logical rank ``rank`` to channels-first."""
    return (0, rank) + tuple(range(1, rank))


def _perm_to_cl(rank: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, rank + 1)) + (1,)


def take(ctx: ConvertContext, i: int, want: str, helpers: set[str] | None = None) -> str:
    """Code for input ``i`` in layout ``want`` (``canon`` or ``cl``), converting when needed."""
    src = ctx.inputs[i]
    name = src.out
    have = layout_of(src)
    rank = len(ctx.in_shapes[i])
    if rank < 2 and want == CL:
        want = CANON  # vectors have no channel axis to move
    if have == want:
        return name
    if have == FLAT_CL:
        if helpers is None:
            raise ValueError("converting a channels-last flatten needs the helpers set")
        helpers.add("channels_first_flat")
        flat_of = tuple(src.extra["flat_of"])
        expr = f"channels_first_flat({name}, {literal(_cl_shape(flat_of))})"
        return expr if want == CANON else take_expr_to_cl(expr, rank)
    if have == CL and want == CANON:
        return f"ops.transpose({name}, {literal(_perm_to_canon(rank))})"
    if have == CANON and want == CL:
        return take_expr_to_cl(name, rank)
    raise ValueError(f"cannot convert layout {have} to {want}")


def take_expr_to_cl(expr: str, rank: int) -> str:
    return f"ops.transpose({expr}, {literal(_perm_to_cl(rank))})" if rank >= 2 else expr


def _cl_shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(shape[1:]) + (shape[0],)


def keras_shape(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """The Keras array shape (no batch axis) of a tensor with this logical shape and layout."""
    return _cl_shape(shape) if layout == CL and len(shape) >= 2 else tuple(shape)


def keras_axis(axis: int, rank: int, layout: str) -> int:
    """A per-sample logical axis as an axis of the batched Keras tensor (-1 for the last)."""
    a = axis % rank
    k = (rank if a == 0 else a) if layout == CL and rank >= 2 else a + 1
    return -1 if k == rank else k


def common_layout(ctx: ConvertContext) -> str:
    """The layout a multi-input op (Add, Concat) works in: channels-last if any input is."""
    layouts = {layout_of(x) for x in ctx.inputs}
    if len(layouts) == 1 and FLAT_CL not in layouts:
        return layouts.pop()
    if CL in layouts and len(ctx.in_shapes[0]) >= 2:
        return CL
    return CANON


def layer(ctx: ConvertContext, forward: str, ctor: str | None = None, *, layout: str = CANON,
          weights: Sequence[KerasWeight] = (), helpers: Sequence[str] = (), training: bool = False,
          **extra: Any) -> MappedLayer:
    """A MappedLayer; checks that ``weights`` cover exactly the node's canonical weights."""
    expected = {key(ctx, n) for n in node_shapes(ctx.analysis, ctx.node)}
    covered = [k for w in weights for k, _ in w.save]
    if sorted(covered) != sorted(expected):
        raise ValueError(f"keras converter for {ctx.node.op} (node {ctx.node.id}) binds {sorted(covered)} "
                         f"but the canonical weights are {sorted(expected)}")
    if weights and ctor is None:
        raise ValueError(f"node {ctx.node.id} ({ctx.node.op}) has weights but no layer to hold them")
    bindings = tuple(WeightBinding(k, f"{ctx.var}.{w.path}", w.transform) for w in weights for k, _ in w.save)
    load_lines = [f"model.{ctx.var}.{w.path}.assign({w.load})" for w in weights]
    save_lines = []
    for w in weights:
        value = f"np.asarray(model.{ctx.var}.{w.path})"
        if len(w.save) == 1:
            save_lines.append(f"out[{literal(w.save[0][0])}] = {w.save[0][1].format(v=value)}")
        else:
            save_lines.append(f"v = {value}")
            save_lines += [f"out[{literal(k)}] = {expr.format(v='v')}" for k, expr in w.save]
    return MappedLayer(node_id=ctx.node.id, op=ctx.node.op, var=ctx.var, out=ctx.out, ctor=ctor,
                       forward=forward, comment=ctx.comment(), weights=bindings,
                       extra={"layout": layout, "helpers": tuple(helpers), "load_lines": load_lines,
                              "save_lines": save_lines,
                              "training": training, "is_input": False, "is_output": False, "flat_of": None,
                              **extra})


def construct(func: str, args: Sequence[str], kwargs: dict[str, Any], code: dict[str, str]) -> str:
    """``func(args…, key=literal…, key=code…)``: typed options first, then initialisers (generated code)."""
    rendered = call(func, *args, **kwargs)
    extra = ", ".join(f"{ident(k)}={v}" for k, v in code.items())
    if not extra:
        return rendered
    return rendered[:-1] + (", " if rendered[-2] != "(" else "") + extra + ")"


def module(ctx: ConvertContext) -> str:
    """``self.<var>``: the attribute that holds this node's layer."""
    return f"self.{ctx.var}"


def initializer(ctx: ConvertContext, name: str) -> str:
    """Initialiser code for the canonical weight ``name`` as its op declares it (:class:`core.ops.Weight`):
    ``torch_uniform(fan_in)`` (U(±1/√fan_in), defined in model.py), a normal or a constant."""
    w = node_weights(ctx.analysis, ctx.node)[name]
    if w.init == "uniform":
        return f"torch_uniform({literal(w.fan_in)})"
    if w.init == "normal":
        return f"keras.initializers.RandomNormal(0.0, {literal(w.std)})"
    return literal(w.init)
