"""LocalResponseNorm: paddle's functional form has torch's window (size//2 channels before,
(size-1)//2 after) and takes images (NCHW) or signals (NCL)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import layer, register


@register("LocalResponseNorm")
def local_response_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    data_format = "NCHW" if len(ctx.in_shapes[0]) == 3 else "NCL"
    return layer(ctx, call("F.local_response_norm", ctx.in_names[0], literal(p["size"]), alpha=p["alpha"],
                           beta=p["beta"], k=p["k"], data_format=data_format))
