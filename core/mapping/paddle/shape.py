"""Flatten and Reshape (the batch axis is kept). Paddle is channels-first like torch, so a
Flatten after a convolution gives the same (C, H, W) row order as the canonical model."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import layer, register


@register("Flatten")
def flatten(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call("paddle.flatten", ctx.in_names[0], start_axis=1))


@register("Reshape")
def reshape(ctx: ConvertContext) -> MappedLayer:
    # the resolved output shape (a -1 in the spec is already worked out), batch axis first
    return layer(ctx, call("paddle.reshape", ctx.in_names[0], literal([-1, *ctx.out_shape])))
