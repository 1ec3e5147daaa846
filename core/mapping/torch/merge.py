"""Residual sums and concatenation."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.torch._common import layer, register, torch_dim


@register("Add")
def add(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, " + ".join(ctx.in_names))


@register("Concat")
def concat(ctx: ConvertContext) -> MappedLayer:
    tensors = "[" + ", ".join(ctx.in_names) + "]"
    return layer(ctx, call("torch.cat", tensors, dim=torch_dim(ctx.params["axis"])))

