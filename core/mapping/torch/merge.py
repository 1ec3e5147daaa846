"""Residual sums and concatenation (U-Net's skip connections cropped to the smaller map first)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, cropped
from core.mapping.torch._common import layer, register, torch_dim
from core.ops.merge import CropConcat


@register("Add")
def add(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, " + ".join(ctx.in_names))


@register("Concat")
def concat(ctx: ConvertContext) -> MappedLayer:
    tensors = "[" + ", ".join(ctx.in_names) + "]"
    return layer(ctx, call("torch.cat", tensors, dim=torch_dim(ctx.params["axis"])))


@register("CropConcat")
def crop_concat(ctx: ConvertContext) -> MappedLayer:
    boxes = CropConcat.crops(ctx.in_shapes, ctx.out_shape)
    tensors = "[" + ", ".join(cropped(n, b) for n, b in zip(ctx.in_names, boxes)) + "]"
    return layer(ctx, call("torch.cat", tensors, dim=1))
