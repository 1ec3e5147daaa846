"""Fully-connected layers."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


@register("Linear")
def linear(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    tied = ctx.tied()
    if tied is not None:  # the head reads the Embedding's table; it holds only its bias
        ctor = call("TiedLinear", literal(p["out_features"]), **({} if p["bias"] else {"bias": False}))
        return layer(ctx, call(module(ctx), ctx.in_names[0], f"self.{tied.var}.weight"), ctor,
                     helpers=("TiedLinear",))
    args = [literal(ctx.in_shapes[0][-1]), literal(p["out_features"])]
    ctor = call("nn.Linear", *args, **({} if p["bias"] else {"bias": False}))
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
