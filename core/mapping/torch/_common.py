"""Shared pieces of the torch converters: the registry and the MappedLayer builder.

Torch is the canonical layout, so every canonical weight ``<node>/<name>`` binds to the
state-dict entry ``<var>.<name>`` unchanged (transform ``identity``).
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, WeightBinding, converters
from core.weights import node_shapes

register = converters("torch").register


def layer(ctx: ConvertContext, forward: str, ctor: str | None = None, helpers: tuple[str, ...] = (),
          **extra: Any) -> MappedLayer:
    """A MappedLayer whose canonical weights bind one-to-one to ``self.<var>``'s state dict."""
    bindings = tuple(WeightBinding(f"{ctx.node.id}/{name}", f"{ctx.var}.{name}")
                     for name in node_shapes(ctx.analysis, ctx.node))
    if bindings and ctor is None:
        raise ValueError(f"node {ctx.node.id} ({ctx.node.op}) has weights but no layer to hold them")
    return MappedLayer(node_id=ctx.node.id, op=ctx.node.op, var=ctx.var, out=ctx.out, ctor=ctor,
                       forward=forward, comment=ctx.comment(), weights=bindings,
                       extra={"helpers": helpers, **extra})


def module(ctx: ConvertContext) -> str:
    """``self.<var>``: the attribute that holds this node's layer."""
    return f"self.{ctx.var}"


def torch_dim(axis: int) -> int:
    """A per-sample axis (no batch axis) as a torch dim of the batched tensor."""
    return axis + 1 if axis >= 0 else axis
