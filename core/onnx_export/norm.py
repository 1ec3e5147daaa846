"""Batch, layer and group normalisation in inference form. A norm without learned affine weights
gets constant ones and zeros; GroupNorm is InstanceNormalization over (N, groups, rest) followed by
the per-channel scale and shift (ONNX's GroupNormalization is opset 18, and changed in 21)."""

from __future__ import annotations

import numpy as np

from core.onnx_export._graph import ExportContext, exports


def _scale_shift(ctx: ExportContext, width: int, prefix: str = "") -> tuple[str, str]:
    if f"{prefix}weight" in ctx.weights:
        return ctx.weight(f"{prefix}weight"), ctx.weight(f"{prefix}bias")
    return ctx.const(f"{prefix}ones", np.ones(width, np.float32)), ctx.const(f"{prefix}zeros",
                                                                              np.zeros(width, np.float32))


@exports("BatchNorm1d", "BatchNorm2d")
def batch_norm(ctx: ExportContext) -> str:
    c = ctx.in_shapes[0][0]
    scale, shift = _scale_shift(ctx, c)
    args = [ctx.inputs[0], scale, shift, ctx.weight("running_mean"), ctx.weight("running_var")]
    return ctx.op("BatchNormalization", args, ctx.out, epsilon=ctx.params["eps"])


def layer_norm(ctx: ExportContext, x: str, width: int, eps: float, prefix: str = "", out: str | None = None) -> str:
    """LayerNorm over the last axis with ``<prefix>weight``/``<prefix>bias`` (or none: ones, zeros)."""
    scale, shift = _scale_shift(ctx, width, prefix)
    return ctx.op("LayerNormalization", [x, scale, shift], out, axis=-1, epsilon=eps)


@exports("LayerNorm")
def layer_norm_node(ctx: ExportContext) -> str:
    return layer_norm(ctx, ctx.inputs[0], ctx.in_shapes[0][-1], ctx.params["eps"], out=ctx.out)


@exports("GroupNorm")
def group_norm(ctx: ExportContext) -> str:
    shape = ctx.in_shapes[0]
    c, groups = shape[0], ctx.params["num_groups"]
    grouped = ctx.reshape(ctx.inputs[0], [0, groups, -1])
    normed = ctx.op("InstanceNormalization", [grouped, ctx.const("group_ones", np.ones(groups, np.float32)),
                                              ctx.const("group_zeros", np.zeros(groups, np.float32))],
                    epsilon=ctx.params["eps"])
    if not ctx.params["affine"]:
        return ctx.reshape(normed, [0, *shape], ctx.out)
    back = ctx.reshape(normed, [0, *shape])
    per_channel = (c,) + (1,) * (len(shape) - 1)  # broadcasts over the positions
    scaled = ctx.op("Mul", [back, ctx.const("weight.per_channel", ctx.weights["weight"].reshape(per_channel))])
    return ctx.op("Add", [scaled, ctx.const("bias.per_channel", ctx.weights["bias"].reshape(per_channel))], ctx.out)
