"""ChannelShuffle written out (paddle's F.channel_shuffle takes images only): reshape to
(N, groups, C/groups, …), swap the two group axes, reshape back."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import layer, register


@register("ChannelShuffle")
def channel_shuffle(ctx: ConvertContext) -> MappedLayer:
    shape = ctx.in_shapes[0]
    g = ctx.params["groups"]
    rest = list(shape[1:])
    split = call("paddle.reshape", ctx.in_names[0], literal([-1, g, shape[0] // g, *rest]))
    swapped = call("paddle.transpose", split, literal([0, 2, 1, *range(3, 3 + len(rest))]))
    return layer(ctx, call("paddle.reshape", swapped, literal([-1, *shape])))
