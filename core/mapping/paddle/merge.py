"""Residual sums and concatenation."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.paddle._common import layer, paddle_axis, register


@register("Add")
def add(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, " + ".join(ctx.in_names))


@register("Concat")
def concat(ctx: ConvertContext) -> MappedLayer:
    tensors = "[" + ", ".join(ctx.in_names) + "]"
    return layer(ctx, call("paddle.concat", tensors, axis=paddle_axis(ctx.params["axis"])))
