"""Spatial resizing of images: upsampling by an integer factor (U-Net's decoder, FPNs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, bool_param, expect_rank, register_op


@register_op
class Upsample(Op):
    name = "Upsample"
    family = "resize"
    reads_channels = True
    help = ("Enlarges an image (C, H, W) by an integer scale_factor per axis: 'nearest' repeats pixels, 'bilinear' "
            "interpolates (torch's rule; align_corners keeps the corner pixels fixed).")
    params = (
        Param("scale_factor", "int_pair", example=2, minimum=1, maximum=64, help="Factor per axis, e.g. 2 or [2, 1]."),
        Param("mode", "choice", "nearest", choices=("nearest", "bilinear"), help="'nearest' or 'bilinear'."),
        bool_param("align_corners", False, "Bilinear only: map the corner pixels of input and output onto each other "
                   "(torch's align_corners=True) instead of the pixel centres."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [3], "an image (C, H, W)")
        if p["align_corners"] and p["mode"] != "bilinear":
            raise ShapeError("align_corners applies to bilinear interpolation only", expected="mode 'bilinear' or "
                             "align_corners false", field="align_corners")
        c, h, w = x.shape
        sh, sw = p["scale_factor"]
        if h * sh * w * sw * c > 1_000_000_000:
            raise ShapeError(f"upsampling {x} by {sh}×{sw} gives more than 10⁹ values", expected="a smaller factor",
                             field="scale_factor")
        return Tensor((c, h * sh, w * sw))
