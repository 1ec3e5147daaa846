"""LocalResponseNorm, channels-last: Keras has no LRN layer, so the template's
``local_response_norm`` helper sums the squares of torch's window (size//2 channels before,
(size-1)//2 after, zero-padded) along the last axis."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CL, layer, register, take


@register("LocalResponseNorm")
def local_response_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    helpers = {"local_response_norm"}
    x = take(ctx, 0, CL, helpers)
    forward = call("local_response_norm", x, literal(p["size"]), literal(p["alpha"]), literal(p["beta"]),
                   literal(p["k"]))
    return layer(ctx, forward, layout=CL, helpers=sorted(helpers))
