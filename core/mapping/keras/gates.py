"""HardSigmoid written out (keras.ops.hard_sigmoid has a fixed slope); element-wise, any layout."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import layer, layout_of, register


@register("HardSigmoid")
def hard_sigmoid(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    src = ctx.inputs[0]
    scaled = f"{ctx.in_names[0]} * {literal(p['alpha'])} + {literal(p['beta'])}"
    return layer(ctx, call("ops.clip", scaled, literal(0.0), literal(1.0)), layout=layout_of(src),
                 flat_of=src.extra.get("flat_of"))
