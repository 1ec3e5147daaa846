"""LocalResponseNorm: torch's own functional form (the catalogue follows torch's window)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, register


@register("LocalResponseNorm")
def local_response_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    return layer(ctx, call("F.local_response_norm", ctx.in_names[0], literal(p["size"]), alpha=p["alpha"],
                           beta=p["beta"], k=p["k"]))
