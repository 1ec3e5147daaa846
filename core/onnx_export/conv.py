"""Convolutions: ONNX's Conv and ConvTranspose take torch's weight layout as it is. Padding is
always explicit (``pads``: every axis's start, then every axis's end); ``'same'`` follows the rule
the generated programs use (core/mapping/torch/conv.py: the odd pixel at the end)."""

from __future__ import annotations

from typing import Any

from core.mapping.torch.conv import same_padding
from core.onnx_export._graph import ExportContext, exports


def _pairs(value: Any, dims: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, tuple) else (value,) * dims


def conv_pads(ctx: ExportContext, dims: int) -> list[int]:
    p = ctx.params
    if p["padding"] == "valid":
        return [0] * (2 * dims)
    if p["padding"] == "same":
        kernel, stride, dilation = (_pairs(p[k], dims) for k in ("kernel_size", "stride", "dilation"))
        sizes = ctx.in_shapes[0][1:]
        pairs = [same_padding(n, k, s, d) for n, k, s, d in zip(sizes, kernel, stride, dilation)]
        return [a for a, _ in pairs] + [b for _, b in pairs]
    pad = p["padding"][:dims]  # Conv1d keeps its single padding as a pair of equal values
    return [*pad, *pad]


def _conv(ctx: ExportContext, dims: int) -> str:
    p = ctx.params
    args = [ctx.inputs[0], ctx.weight("weight")] + ([ctx.weight("bias")] if "bias" in ctx.weights else [])
    return ctx.op("Conv", args, ctx.out, kernel_shape=list(_pairs(p["kernel_size"], dims)),
                  strides=list(_pairs(p["stride"], dims)), dilations=list(_pairs(p["dilation"], dims)),
                  group=p["groups"], pads=conv_pads(ctx, dims))


@exports("Conv2d")
def conv2d(ctx: ExportContext) -> str:
    return _conv(ctx, 2)


@exports("Conv1d")
def conv1d(ctx: ExportContext) -> str:
    return _conv(ctx, 1)


@exports("ConvTranspose2d")
def conv_transpose2d(ctx: ExportContext) -> str:
    p = ctx.params
    args = [ctx.inputs[0], ctx.weight("weight")] + ([ctx.weight("bias")] if "bias" in ctx.weights else [])
    return ctx.op("ConvTranspose", args, ctx.out, kernel_shape=list(p["kernel_size"]), strides=list(p["stride"]),
                  pads=[*p["padding"], *p["padding"]], output_padding=list(p["output_padding"]))
