"""Flatten and Reshape (the batch axis is kept)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, register


@register("Flatten")
def flatten(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call("torch.flatten", ctx.in_names[0], literal(1)))


@register("Reshape")
def reshape(ctx: ConvertContext) -> MappedLayer:
    x = ctx.in_names[0]
    dims = ", ".join(literal(d) for d in ctx.params["shape"])
    return layer(ctx, f"{x}.reshape({x}.shape[0], {dims})")
