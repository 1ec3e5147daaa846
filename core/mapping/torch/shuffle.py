"""ChannelShuffle: the channel axis split into (groups, C/groups), swapped and flattened back."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, literal
from core.mapping.torch._common import layer, register


@register("ChannelShuffle")
def channel_shuffle(ctx: ConvertContext) -> MappedLayer:
    g = ctx.params["groups"]
    split = literal((g, ctx.in_shapes[0][0] // g))
    return layer(ctx, f"{ctx.in_names[0]}.unflatten(1, {split}).transpose(1, 2).flatten(1, 2)")
