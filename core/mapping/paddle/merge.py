"""Residual sums and concatenation."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, cropped
from core.mapping.paddle._common import layer, paddle_axis, register
from core.ops.merge import CropConcat


@register("Add")
def add(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, " + ".join(ctx.in_names))


@register("Concat")
def concat(ctx: ConvertContext) -> MappedLayer:
    tensors = "[" + ", ".join(ctx.in_names) + "]"
    return layer(ctx, call("paddle.concat", tensors, axis=paddle_axis(ctx.params["axis"])))


@register("CropConcat")
def crop_concat(ctx: ConvertContext) -> MappedLayer:
    boxes = CropConcat.crops(ctx.in_shapes, ctx.out_shape)
    tensors = "[" + ", ".join(cropped(n, b) for n, b in zip(ctx.in_names, boxes)) + "]"
    return layer(ctx, call("paddle.concat", tensors, axis=1))
