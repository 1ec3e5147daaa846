"""Upsampling: Resize by constant scales (1, 1, sh, sw): nearest with ``asymmetric`` coordinates and
``floor`` (an integer factor repeats pixels, as torch), linear with ``align_corners`` or
``pytorch_half_pixel`` (torch's own rule, what torch's exporter writes)."""

from __future__ import annotations

import numpy as np

from core.onnx_export._graph import ExportContext, exports


@exports("Upsample")
def upsample(ctx: ExportContext) -> str:
    p = ctx.params
    scales = ctx.const("scales", np.asarray([1.0, 1.0, *p["scale_factor"]], dtype=np.float32))
    if p["mode"] == "nearest":
        return ctx.op("Resize", [ctx.inputs[0], "", scales], ctx.out, mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rule = "align_corners" if p["align_corners"] else "pytorch_half_pixel"
    return ctx.op("Resize", [ctx.inputs[0], "", scales], ctx.out, mode="linear",
                  coordinate_transformation_mode=rule)
