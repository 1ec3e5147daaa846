"""Fully-connected layers."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


@register("Linear")
def linear(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    args = [literal(ctx.in_shapes[0][-1]), literal(p["out_features"])]
    ctor = call("nn.Linear", *args, **({} if p["bias"] else {"bias": False}))
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
