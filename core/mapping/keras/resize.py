"""Upsampling, channels-last. Nearest: ``UpSampling2D`` (an integer factor repeats pixels, as torch).
Bilinear: torch's interpolation written out exactly as separable row and column interpolation matrices
(``bilinear_upsample2d``), for both align_corners rules (Keras's own bilinear resize has no align_corners)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CL, layer, module, register, take


@register("Upsample")
def upsample(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    if p["mode"] == "nearest":
        ctor = call("layers.UpSampling2D", size=p["scale_factor"])
        return layer(ctx, call(module(ctx), x), ctor, layout=CL, helpers=sorted(helpers))
    helpers.add("bilinear_upsample2d")
    forward = call("bilinear_upsample2d", x, literal(tuple(p["scale_factor"])), literal(p["align_corners"]))
    return layer(ctx, forward, layout=CL, helpers=sorted(helpers))
