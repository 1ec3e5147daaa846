"""ChannelShuffle, channels-last: the last axis split into (groups, C/groups), swapped, joined back."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CL, keras_shape, layer, register, take


@register("ChannelShuffle")
def channel_shuffle(ctx: ConvertContext) -> MappedLayer:
    shape = ctx.in_shapes[0]
    g = ctx.params["groups"]
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    positions = keras_shape(shape, CL)[:-1]
    split = call("ops.reshape", x, literal((-1, *positions, g, shape[0] // g)))
    swapped = call("ops.swapaxes", split, literal(-1), literal(-2))
    return layer(ctx, call("ops.reshape", swapped, literal((-1, *positions, shape[0]))), layout=CL,
                 helpers=sorted(helpers))
