"""Shared pieces of the PaddlePaddle converters: the registry and the MappedLayer builder.

Paddle runs channels-first (NCHW) like torch, so tensors need no layout change. Weights do:
a canonical (torch-layout) weight binds to ``<var>.<paddle name>`` through one of the
transforms that the generated ``model.py`` defines (``to_paddle`` / ``from_paddle``):

- ``identity``   the same array (convolution kernels, biases, norms, embeddings, LSTM/GRU);
- ``transpose``  torch's Linear ``(out, in)`` → paddle's ``(in, out)``;
- ``q``/``k``/``v`` (and ``q_transpose``/…) one third of torch's packed attention projection
  ``in_proj_weight (3E, E)`` / ``in_proj_bias (3E,)``, which paddle keeps as separate
  ``q_proj``/``k_proj``/``v_proj`` Linear layers.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, WeightBinding, converters
from core.weights import node_shapes

register = converters("paddle").register

TRANSFORMS = ("identity", "transpose", "q", "k", "v", "q_transpose", "k_transpose", "v_transpose")


def layer(ctx: ConvertContext, forward: str, ctor: str | None = None, helpers: tuple[str, ...] = (),
          weights: tuple[WeightBinding, ...] | None = None, **extra: Any) -> MappedLayer:
    """A MappedLayer; ``weights`` defaults to every canonical weight bound unchanged to ``<var>.<name>``."""
    if weights is None:
        weights = tuple(bind(ctx, name) for name in node_shapes(ctx.analysis, ctx.node))
    if weights and ctor is None:
        raise ValueError(f"node {ctx.node.id} ({ctx.node.op}) has weights but no layer to hold them")
    for w in weights:
        if w.transform not in TRANSFORMS:
            raise ValueError(f"unknown weight transform {w.transform!r} for {w.canonical}")
    return MappedLayer(node_id=ctx.node.id, op=ctx.node.op, var=ctx.var, out=ctx.out, ctor=ctor,
                       forward=forward, comment=ctx.comment(), weights=weights,
                       extra={"helpers": helpers, **extra})


def bind(ctx: ConvertContext, name: str, target: str | None = None, transform: str = "identity") -> WeightBinding:
    """Canonical ``<node>/<name>`` → paddle parameter ``<var>.<target or name>``."""
    return WeightBinding(f"{ctx.node.id}/{name}", f"{ctx.var}.{target or name}", transform)


def linear_bindings(ctx: ConvertContext, prefix: str = "") -> list[WeightBinding]:
    """An ``nn.Linear``'s weight (transposed) and bias, named ``<prefix>weight``/``<prefix>bias``."""
    shapes = node_shapes(ctx.analysis, ctx.node)
    out = [bind(ctx, f"{prefix}weight", transform="transpose")]
    if f"{prefix}bias" in shapes:
        out.append(bind(ctx, f"{prefix}bias"))
    return out


def attention_bindings(ctx: ConvertContext, prefix: str = "") -> list[WeightBinding]:
    """torch's packed ``in_proj`` split into paddle's q/k/v projections, plus ``out_proj``."""
    shapes = node_shapes(ctx.analysis, ctx.node)
    out = []
    for part in "qkv":
        out.append(bind(ctx, f"{prefix}in_proj_weight", f"{prefix}{part}_proj.weight", f"{part}_transpose"))
        if f"{prefix}in_proj_bias" in shapes:
            out.append(bind(ctx, f"{prefix}in_proj_bias", f"{prefix}{part}_proj.bias", part))
    return out + linear_bindings(ctx, f"{prefix}out_proj.")


def module(ctx: ConvertContext) -> str:
    """``self.<var>``: the attribute that holds this node's layer."""
    return f"self.{ctx.var}"


def paddle_axis(axis: int) -> int:
    """A per-sample axis (no batch axis) as an axis of the batched tensor."""
    return axis + 1 if axis >= 0 else axis


def pair_or_int(value: tuple[int, int]) -> int | tuple[int, int]:
    """``(3, 3)`` → ``3`` (what a person writes), ``(3, 5)`` stays a pair."""
    return value[0] if value[0] == value[1] else value
