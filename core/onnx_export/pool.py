"""Pooling. Windowed pools map onto MaxPool/AveragePool with explicit padding (torch's divisor
counts the padding: ``count_include_pad``); an adaptive pool whose windows tile the input evenly is an
AveragePool, an uneven one two MatMuls with constant averaging matrices (torch's windows:
start ⌊i·n/out⌋, end ⌈(i+1)·n/out⌉); global and sequence pools are reductions."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from core.onnx_export._graph import ExportContext, exports


@exports("MaxPool2d", "AvgPool2d")
def pool2d(ctx: ExportContext) -> str:
    """``ceil_mode`` is written as extra padding at the end (runtimes disagree on ONNX's ceil rule):
    torch's last window starts inside the input or its left padding, so the extra is below
    ``kernel − padding``, and it is never counted in an average's divisor."""
    p = ctx.params
    kernel, pad = list(p["kernel_size"]), list(p["padding"])
    stride = list(p["stride"] or kernel)
    sizes, outs = ctx.in_shapes[0][1:], ctx.out_shape[1:]
    extra = [max(0, (o - 1) * s + k - (n + 2 * q)) for n, o, k, s, q in zip(sizes, outs, kernel, stride, pad)]
    attrs = {"kernel_shape": kernel, "strides": stride}
    if ctx.node.op == "MaxPool2d":  # padding is never the maximum
        return ctx.op("MaxPool", ctx.inputs, ctx.out, pads=pad + [q + e for q, e in zip(pad, extra)], **attrs)
    if not p["count_include_pad"]:  # neither the padding nor ceil_mode's extra is counted
        return ctx.op("AveragePool", ctx.inputs, ctx.out, pads=pad + [q + e for q, e in zip(pad, extra)],
                      count_include_pad=0, **attrs)
    if not any(extra):
        return ctx.op("AveragePool", ctx.inputs, ctx.out, pads=pad + pad, count_include_pad=1, **attrs)
    zero_padded = ctx.op("Pad", [ctx.inputs[0], ctx.const("pads", [0, 0, *pad, 0, 0, *pad])])  # counted
    return ctx.op("AveragePool", [zero_padded], ctx.out, pads=[0, 0, *extra], count_include_pad=0, **attrs)


def averaging_matrix(size: int, out: int) -> np.ndarray:
    """(out, size): row i averages torch's adaptive window i of an axis of length ``size``."""
    matrix = np.zeros((out, size), dtype=np.float64)
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix.astype(np.float32)


@exports("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(ctx: ExportContext) -> str:
    _, h, w = ctx.in_shapes[0]
    oh, ow = ctx.params["output_size"]
    if h % oh == 0 and w % ow == 0:
        kernel = [h // oh, w // ow]
        return ctx.op("AveragePool", ctx.inputs, ctx.out, kernel_shape=kernel, strides=kernel)
    rows = ctx.op("MatMul", [ctx.inputs[0], ctx.const("pool_w", averaging_matrix(w, ow).T)])  # (N, C, H, ow)
    return ctx.op("MatMul", [ctx.const("pool_h", averaging_matrix(h, oh)), rows], ctx.out)  # (N, C, oh, ow)


@exports("GlobalAvgPool")
def global_avg_pool(ctx: ExportContext) -> str:
    axes = [2, 3] if len(ctx.in_shapes[0]) == 3 else [2]
    return ctx.op("ReduceMean", ctx.inputs, ctx.out, axes=axes, keepdims=0)


@exports("SequencePool")
def sequence_pool(ctx: ExportContext) -> str:
    if ctx.params["mode"] == "first":  # x[:, 0]: a scalar (0-d) index drops the time axis
        index = ctx.parts.unique(f"{ctx.node.id}/first")
        ctx.parts.initializers.append(numpy_helper.from_array(np.asarray(0, dtype=np.int64), index))
        return ctx.op("Gather", [ctx.inputs[0], index], ctx.out, axis=1)
    reduce = "ReduceMean" if ctx.params["mode"] == "mean" else "ReduceMax"
    return ctx.op(reduce, ctx.inputs, ctx.out, axes=[1], keepdims=0)
