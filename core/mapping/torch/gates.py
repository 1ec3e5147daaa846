"""HardSigmoid written out (torch's F.hardsigmoid has a fixed slope of 1/6)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, literal
from core.mapping.torch._common import layer, register


@register("HardSigmoid")
def hard_sigmoid(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    return layer(ctx, f"torch.clamp({ctx.in_names[0]} * {literal(p['alpha'])} + {literal(p['beta'])}, 0.0, 1.0)")
