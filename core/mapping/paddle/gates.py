"""HardSigmoid: paddle's F.hardsigmoid takes the slope and offset."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.paddle._common import layer, register


@register("HardSigmoid")
def hard_sigmoid(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    return layer(ctx, call("F.hardsigmoid", ctx.in_names[0], slope=p["alpha"], offset=p["beta"]))
