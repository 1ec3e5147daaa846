"""BatchNormalization, LayerNormalization, LRN, and the per-channel affine form (Mul/Add by a constant) folded into BatchNorm.

A BatchNorm computes ``weight·(x − mean)/√(var + eps) + bias`` per channel, so a Mul or Add by a
per-channel constant that follows one (and is its only reader) changes its weight and bias; one
that follows anything else becomes a BatchNorm of its own with mean 0 and variance 1 − eps (which
makes the denominator exactly 1). DenseNet's and Inception-v2's Caffe exports are written
BatchNormalization → Mul → Add.
"""

from __future__ import annotations

import numpy as np

from core.onnx_import._graph import NodeContext, Refused, Value, imports

EPS = 1e-5


def _bn_op(x: Value) -> str:
    if len(x.shape) == 3:
        return "BatchNorm2d"
    if len(x.shape) in (1, 2):
        return "BatchNorm1d"
    raise Refused(f"normalises a {len(x.shape)}-axis sample {x.shape}", expected="features, a signal or an image")


@imports("BatchNormalization")
def batch_norm(ctx: NodeContext) -> Value:
    x = ctx.value(0)
    if ctx.attr("training_mode", 0) or ctx.attr("is_test", 1) == 0 or len(ctx.node.output) > 1 and any(
            ctx.node.output[1:]):
        raise Refused("it is in training mode", expected="inference mode (running statistics)")
    weights = {"weight": ctx.weight(1, "scale"), "bias": ctx.weight(2, "bias"),
               "running_mean": ctx.weight(3, "mean"), "running_var": ctx.weight(4, "variance")}
    eps = float(ctx.attr("epsilon", 1e-5))
    momentum = round(1.0 - float(ctx.attr("momentum", 0.9)), 6)  # ONNX keeps the old statistics' weight
    return ctx.add(_bn_op(x), {"eps": eps, "momentum": momentum}, [x], weights)


def per_channel(c: np.ndarray, x: Value) -> np.ndarray | None:
    """The constant as one number per channel (axis 0 of a sample), or None if it varies otherwise."""
    full_shape = (1, *x.shape)
    if c.ndim > len(full_shape):
        return None
    try:
        full = np.broadcast_to(c.astype(np.float32), full_shape)
    except ValueError:
        return None
    if len(x.shape) == 1:
        return full[0].copy()
    channel = full[(0, slice(None)) + (0,) * (len(x.shape) - 1)]
    return channel.copy() if np.array_equal(full, np.broadcast_to(
        channel.reshape((1, -1) + (1,) * (len(x.shape) - 1)), full_shape)) else None


def affine(ctx: NodeContext, x: Value, scale: np.ndarray | None, shift: np.ndarray | None, reader: bool) -> Value:
    """x·scale + shift per channel: folded into the BatchNorm that yields ``x`` when this node is its only
    reader, else a BatchNorm of its own."""
    b = ctx.builder
    key = f"{x.node}/weight"
    if reader and b.ops.get(x.node) in ("BatchNorm1d", "BatchNorm2d") and key in b.weights:
        if scale is not None:
            b.weights[key] = b.weights[key] * scale
            b.weights[f"{x.node}/bias"] = b.weights[f"{x.node}/bias"] * scale
        if shift is not None:
            b.weights[f"{x.node}/bias"] = b.weights[f"{x.node}/bias"] + shift
        return x
    c = x.shape[0]
    weights = {"weight": np.ones(c, np.float32) if scale is None else scale,
               "bias": np.zeros(c, np.float32) if shift is None else shift,
               "running_mean": np.zeros(c, np.float32), "running_var": np.full(c, 1.0 - EPS, np.float32)}
    return ctx.add(_bn_op(x), {"eps": EPS}, [x], weights)


@imports("LRN")
def lrn(ctx: NodeContext) -> Value:
    size = int(ctx.attr("size"))
    if size % 2 == 0:
        raise Refused(f"size {size} is even: ONNX and torch centre an even window differently",
                      expected="an odd size")
    return ctx.add("LocalResponseNorm", {"size": size, "alpha": float(ctx.attr("alpha", 1e-4)),
                                         "beta": float(ctx.attr("beta", 0.75)), "k": float(ctx.attr("bias", 1.0))},
                   [ctx.value(0)])


@imports("LayerNormalization")
def layer_norm(ctx: NodeContext) -> Value:
    """LayerNormalization over the last axis (torch's, and FlowTrain's export) is a LayerNorm with its
    scale and bias (zeros when the bias is left out); over more axes the catalogue has no op."""
    x = ctx.value(0)
    rank = len(x.shape) + 1
    axis = int(ctx.attr("axis", -1))
    if axis % rank != rank - 1 or not -rank <= axis < rank:
        raise Refused(f"it normalises from axis {axis} of a {rank}-axis tensor (batch included)",
                      expected=f"axis -1 or {rank - 1}: the last axis only", fix="LayerNorm normalises the last axis; "
                      "reshape the axes to normalise into one last axis before it")
    if int(ctx.attr("stash_type", 1)) != 1:
        raise Refused(f"it computes its statistics as ONNX type {ctx.attr('stash_type')}",
                      expected="stash_type 1 (float32, the default)")
    if any(ctx.node.output[1:]):
        raise Refused("its mean or inverse deviation outputs are read", expected="only the normalised output read")
    width = x.shape[-1]
    scale = ctx.weight(1, "scale")
    bias = ctx.weight(2, "bias") if len(ctx.inputs) > 2 and ctx.inputs[2] is not None else np.zeros(width, np.float32)
    if scale.size != width or bias.size != width:
        raise Refused(f"its scale {scale.shape} and bias {bias.shape} are not one number per feature of {x.shape}",
                      expected=f"scale and bias of shape ({width},)")
    return ctx.add("LayerNorm", {"eps": float(ctx.attr("epsilon", 1e-5)), "elementwise_affine": True}, [x],
                   {"weight": scale.reshape(width), "bias": bias.reshape(width)})
