"""Reshape, Flatten, Squeeze/Unsqueeze, Transpose (ShuffleNet's channel shuffle) and a zero Pad.

A Reshape's target includes the batch axis, which must stay first (0, -1 or the batch size itself:
shape subgraphs folded from ``Shape`` yield the latter). ShuffleNet writes its channel shuffle
Reshape (C, H, W) → (g, C/g, H, W), Transpose of those two axes, Reshape back: the first Reshape
yields a :class:`SplitChannels`, the Transpose swaps it, the Reshape back emits ``ChannelShuffle``.
"""

from __future__ import annotations

import math

import numpy as np

from core.onnx_import._graph import Imported, NodeContext, Refused, SplitChannels, Tokens, Value, ZeroPadded, imports


def _target(ctx: NodeContext, shape: tuple[int, ...], raw: list[int]) -> tuple[int, ...]:
    """The per-sample target of a Reshape (0 copies the input's axis, one -1 takes the rest)."""
    full = (ctx.builder.batch, *shape)
    if not raw or raw[0] not in (0, -1, ctx.builder.batch):
        raise Refused(f"its target {raw} does not keep the batch axis first", expected="[0 or -1 or N, …]")
    dims = [full[i] if d == 0 and i < len(full) else d for i, d in enumerate(raw)][1:]
    numel = math.prod(shape)
    if raw[0] == -1 and -1 not in dims:
        return tuple(dims)
    if dims.count(-1) > 1:
        raise Refused(f"its target {raw} has more than one -1")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or numel % known:
            raise Refused(f"{numel} elements cannot fill {raw}")
        dims[dims.index(-1)] = numel // known
    if math.prod(dims) != numel:
        raise Refused(f"the target {raw} does not hold the {numel} elements of {shape}")
    return tuple(dims)


def reshape_value(ctx: NodeContext, got: Imported, target: tuple[int, ...]) -> Imported:
    if isinstance(got, SplitChannels):
        src = got.source
        if target == src.shape:
            return ctx.add("ChannelShuffle", {"groups": got.groups}, [src]) if got.swapped else src
        raise Refused(f"reshapes a channel axis split into {got.groups} groups to {target}",
                      expected=f"the original shape {src.shape}")
    x = got
    if target == x.shape:
        return x
    if _patch_conv(ctx, x) and target == (x.shape[0], x.shape[1] * x.shape[2]) and ctx.single_consumer[0]:
        return Tokens(x, ctx.name)
    if len(x.shape) >= 2 and len(target) == len(x.shape) + 1 and target[2:] == x.shape[1:] \
            and target[0] * target[1] == x.shape[0]:
        return SplitChannels(x, target[0])
    if target == (math.prod(x.shape),):
        return ctx.add("Flatten", {}, [x])
    return ctx.add("Reshape", {"shape": list(target)}, [x])


def _patch_conv(ctx: NodeContext, x: Value) -> bool:
    """Whether ``x`` is a convolution over non-overlapping patches (kernel = stride, no padding)."""
    p = ctx.builder.params.get(x.node, {})
    return ctx.builder.ops.get(x.node) == "Conv2d" and p["kernel_size"] == p["stride"] and \
        p["padding"] == (0, 0) and p["dilation"] == (1, 1) and p["groups"] == 1


def _input(ctx: NodeContext) -> Imported:
    got = ctx.inputs[0]
    if got is None or isinstance(got, np.ndarray):
        raise Refused("its input is not computed by the network")
    return got


def _shape_of(got: Imported) -> tuple[int, ...]:
    if isinstance(got, Tokens):
        e, h, w = got.source.shape
        return (e, h * w)
    return got.source.shape if isinstance(got, SplitChannels) else got.shape


@imports("Reshape")
def reshape(ctx: NodeContext) -> Imported:
    got = _input(ctx)
    raw = ctx.const(1) if ctx.opset >= 5 else np.asarray(ctx.attr("shape"))
    if raw is None:
        raise Refused("its target shape is computed from the data", expected="a constant target shape")
    shape = _shape_of(got)
    if isinstance(got, SplitChannels):
        shape = (got.groups, shape[0] // got.groups, *shape[1:])
    return reshape_value(ctx, got, _target(ctx, shape, [int(d) for d in np.asarray(raw).reshape(-1)]))


@imports("Flatten")
def flatten(ctx: NodeContext) -> Value:
    x = ctx.value(0)
    axis = int(ctx.attr("axis", 1)) % (len(x.shape) + 1)
    if axis != 1:
        raise Refused(f"it flattens from axis {axis}", expected="axis 1 (everything but the batch axis)")
    return x if len(x.shape) == 1 else ctx.add("Flatten", {}, [x])


def _axes(ctx: NodeContext) -> list[int]:
    if ctx.opset >= 13 and len(ctx.inputs) > 1:
        axes = ctx.const(1)
        if axes is None:
            raise Refused("its axes are computed from the data", expected="constant axes")
        return [int(a) for a in axes.reshape(-1)]
    return list(ctx.attr("axes", []))


@imports("Squeeze", "Unsqueeze")
def squeeze(ctx: NodeContext) -> Imported:
    x = ctx.value(0)
    full = [ctx.builder.batch, *x.shape]
    axes = _axes(ctx)
    if ctx.node.op_type == "Squeeze":
        rank = len(full)
        drop = {a % rank for a in axes} if axes else {i for i, d in enumerate(full) if d == 1 and i > 0}
        if 0 in drop:
            raise Refused("it removes the batch axis", expected="axes of one sample")
        target = [d for i, d in enumerate(full) if i not in drop]
    else:
        rank = len(full) + len(axes)
        inserted = sorted(a % rank for a in axes)
        if 0 in inserted:
            raise Refused("it inserts an axis before the batch axis", expected="axes after the batch axis")
        rest = iter(full)
        target = [1 if i in inserted else next(rest) for i in range(rank)]
    return reshape_value(ctx, x, tuple(target[1:]))


@imports("Transpose")
def transpose(ctx: NodeContext) -> Imported:
    got = _input(ctx)
    rank = len(_shape_of(got)) + 1 + (1 if isinstance(got, SplitChannels) else 0)
    perm = list(ctx.attr("perm", list(reversed(range(rank)))))
    if perm == list(range(rank)):
        return got
    if isinstance(got, SplitChannels) and perm == [0, 2, 1, *range(3, rank)]:
        return SplitChannels(got.source, got.groups, not got.swapped)
    if isinstance(got, Tokens) and perm == [0, 2, 1]:
        return patch_embed(ctx, got)
    raise Refused(f"it permutes the axes {perm}", expected="the two group axes of a channel shuffle "
                  "(Reshape (N, g, C/g, …) → Transpose [0, 2, 1, …] → Reshape back), or the tokens of a patch "
                  "convolution (Conv with kernel = stride → Reshape (N, E, T) → Transpose [0, 2, 1])")


def patch_embed(ctx: NodeContext, tokens: Tokens) -> Value:
    """The patch convolution before ``tokens`` becomes one PatchEmbed with its weights."""
    conv = tokens.source.node
    patch = ctx.builder.params[conv]["kernel_size"]
    inputs, weights = ctx.builder.remove(conv)
    params = {"patch_size": list(patch), "embed_dim": tokens.source.shape[0], "bias": "bias" in weights}
    return ctx.builder.add("PatchEmbed", params, inputs, conv, weights)


@imports("Pad")
def pad(ctx: NodeContext) -> Imported:
    """Zero padding of the spatial axes, taken over by the convolution or average pool that reads it
    (TensorFlow exports pad explicitly before a 'valid' convolution); by nothing, no node at all."""
    x = ctx.value(0)
    rank = len(x.shape) + 1
    if ctx.opset >= 11:
        raw, fill = ctx.const(1), ctx.const(2)
    else:
        raw, fill = np.asarray(ctx.attr("pads", [])), np.asarray(ctx.attr("value", 0.0))
    mode = ctx.attr("mode", "constant")
    if raw is None or (len(ctx.inputs) > 3 and ctx.inputs[3] is not None):
        raise Refused("its pads or axes are computed or partial", expected="constant pads for every axis")
    pads = [int(p) for p in np.asarray(raw).reshape(-1)]
    if len(pads) != 2 * rank:
        raise Refused(f"pads {pads} do not cover the {rank} axes", expected=f"{2 * rank} numbers")
    if not any(pads):
        return x
    value = 0.0 if fill is None else float(np.asarray(fill).reshape(-1)[0])
    if mode != "constant" or value != 0.0 or any(p < 0 for p in pads) or pads[0] or pads[1] or pads[rank] or \
            pads[rank + 1]:
        raise Refused(f"{mode} padding by {pads} with {value:g}",
                      expected="zero padding of the positions (not the batch or channel axis), read by a Conv "
                               "or an AveragePool that counts padding")
    return ZeroPadded(x, tuple(pads[2:rank] + pads[rank + 2:]))
