"""Flatten and Reshape (the batch axis is kept).

Flatten of a channels-last tensor keeps the Keras order (H, W, C) and marks the result
``flat_cl``: a following Linear absorbs the order into its kernel rows, anything else
converts it back to torch's channel-major order.
"""

from __future__ import annotations

import math

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CANON, CL, FLAT_CL, layer, layout_of, register, take


@register("Flatten")
def flatten(ctx: ConvertContext) -> MappedLayer:
    src = ctx.inputs[0]
    shape = ctx.in_shapes[0]
    forward = call("ops.reshape", src.out, literal((-1, math.prod(shape))))
    if layout_of(src) == CL and len(shape) >= 2:
        return layer(ctx, forward, layout=FLAT_CL, flat_of=tuple(shape))
    if layout_of(src) == FLAT_CL:
        return layer(ctx, src.out, layout=FLAT_CL, flat_of=src.extra["flat_of"])
    if len(shape) == 1:
        return layer(ctx, src.out, layout=CANON)
    return layer(ctx, forward, layout=CANON)


@register("Reshape")
def reshape(ctx: ConvertContext) -> MappedLayer:
    helpers: set[str] = set()
    x = take(ctx, 0, CANON, helpers)
    target = (-1,) + tuple(ctx.out_shape)
    return layer(ctx, call("ops.reshape", x, literal(target)), layout=CANON, helpers=sorted(helpers))
