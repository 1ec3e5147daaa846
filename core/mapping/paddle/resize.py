"""Upsampling: ``nn.Upsample``; paddle's ``align_mode=0`` (its default) is torch's half-pixel rule for
bilinear interpolation without align_corners, and integer-factor nearest upsampling repeats pixels in both."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.paddle._common import layer, module, register


@register("Upsample")
def upsample(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    sh, sw = p["scale_factor"]
    kwargs: dict[str, Any] = {"scale_factor": sh if sh == sw else [sh, sw], "mode": p["mode"]}
    if p["mode"] == "bilinear":
        kwargs["align_corners"] = p["align_corners"]
    return layer(ctx, call(module(ctx), ctx.in_names[0]), call("nn.Upsample", **kwargs))
