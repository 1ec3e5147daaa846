"""Resize of an image by an integer factor per spatial axis: Upsample.

Nearest: the pairs of coordinate rule and rounding that repeat each pixel s times for an integer factor s
(torch's ``asymmetric`` + ``floor``; a half-pixel rule, (i + ½)/s − ½, with either rounding to the
nearest, which never meets a tie there). Linear: ``pytorch_half_pixel`` or ``half_pixel`` (torch's
align_corners=False; they differ only on an axis of length 1) or ``align_corners``."""

from __future__ import annotations

from core.onnx_import._graph import NodeContext, Refused, Value, imports

_NEAREST = {("asymmetric", "floor"), ("half_pixel", "round_prefer_ceil"), ("pytorch_half_pixel", "round_prefer_ceil"),
            ("half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_floor")}
_LINEAR = {"pytorch_half_pixel": False, "half_pixel": False, "align_corners": True}


def _factors(ctx: NodeContext, x: Value) -> list[int]:
    """The integer scale of each spatial axis, from ``scales`` or ``sizes`` (batch and channel kept)."""
    scales, sizes = ctx.const(2), ctx.const(3)
    full = [ctx.builder.batch, *x.shape]
    if scales is not None and scales.size:
        ratios = [float(v) for v in scales.reshape(-1)]
    elif sizes is not None and sizes.size:
        ratios = [int(s) / n for s, n in zip(sizes.reshape(-1), full)]
    else:
        raise Refused("its scales and sizes are computed or missing", expected="constant scales or sizes")
    if len(ratios) != 4 or ratios[:2] != [1.0, 1.0] or any(r < 1 or not float(r).is_integer() for r in ratios[2:]):
        raise Refused(f"it scales the axes by {ratios}",
                      expected="an image (N, C, H, W) enlarged by integer factors (1, 1, sh, sw)")
    return [int(r) for r in ratios[2:]]


@imports("Resize")
def resize(ctx: NodeContext) -> Value:
    x = ctx.value(0)
    if len(x.shape) != 3:
        raise Refused(f"it resizes a {len(x.shape)}-axis sample {x.shape}", expected="an image (C, H, W)")
    factors = _factors(ctx, x)
    mode = ctx.attr("mode", "nearest")
    rule = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if ctx.attr("antialias", 0) or ctx.attr("axes") is not None:
        raise Refused("it antialiases or names its axes", expected="a plain Resize of all four axes")
    if mode == "nearest":
        rounding = ctx.attr("nearest_mode", "round_prefer_floor")
        if (rule, rounding) not in _NEAREST:
            raise Refused(f"nearest with {rule} coordinates and {rounding} rounding",
                          expected="asymmetric + floor (repeating pixels), or a half-pixel rule with rounding")
        return ctx.add("Upsample", {"scale_factor": factors, "mode": "nearest"}, [x])
    if mode == "linear" and rule in _LINEAR:
        return ctx.add("Upsample", {"scale_factor": factors, "mode": "bilinear", "align_corners": _LINEAR[rule]}, [x])
    raise Refused(f"{mode} interpolation with {rule} coordinates",
                  expected="nearest, or linear with pytorch_half_pixel, half_pixel or align_corners")

