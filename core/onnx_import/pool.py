"""Pooling. ONNX pads may differ at the end of an axis (Caffe-converted models pad the end by what
Caffe's ceil rounding adds): a max pool whose end padding yields exactly ``ceil_mode``'s windows is a
``ceil_mode`` max pool (padding never wins a maximum). An average pool keeps ONNX's
``count_include_pad`` (default 0); one whose single window covers the whole input and hangs past
its end (GoogLeNet's last pool: the mean of every position) is AdaptiveAvgPool2d(1)."""

from __future__ import annotations

import numpy as np

from core.onnx_import._graph import NodeContext, Refused, Value, imports
from core.onnx_import.conv import explicit_pads, symmetric, with_pad
from core.ops.registry import conv_out


def _window(ctx: NodeContext, x: Value) -> tuple[list[int], list[int], list[int]]:
    if len(x.shape) != 3:
        raise Refused(f"pools a {len(x.shape) - 1}-d input {x.shape}", expected="images (C, H, W)")
    kernel = list(ctx.attr("kernel_shape"))
    strides = list(ctx.attr("strides", [1, 1]))
    if list(ctx.attr("dilations", [1, 1])) != [1, 1]:
        raise Refused("a dilated pooling window", expected="dilations 1")
    return kernel, strides, explicit_pads(ctx, x.shape[1:], kernel, strides, [1, 1])


def _onnx_out(size: int, k: int, s: int, begin: int, end: int, ceil: bool) -> int:
    num = size + begin + end - k
    return (-(-num // s) if ceil else num // s) + 1


@imports("MaxPool")
def max_pool(ctx: NodeContext) -> Value:
    x = ctx.value(0)
    kernel, strides, pads = _window(ctx, x)
    ceil = bool(ctx.attr("ceil_mode", 0))
    begins, ends = pads[:2], pads[2:]
    want = [_onnx_out(n, kernel[i], strides[i], begins[i], ends[i], ceil) for i, n in enumerate(x.shape[1:])]
    for mode in (False, True):
        got = [conv_out(n, kernel[i], strides[i], begins[i], ceil=mode) for i, n in enumerate(x.shape[1:])]
        if got == want and (mode or begins == ends):
            return ctx.add("MaxPool2d", {"kernel_size": kernel, "stride": strides, "padding": begins,
                                         "ceil_mode": mode}, [x])
    raise Refused(f"its padding {pads} gives {want[0]}×{want[1]} windows, which no symmetric padding "
                  "(with or without ceil_mode) gives", expected="padding that ceil_mode can express")


@imports("AveragePool")
def average_pool(ctx: NodeContext) -> Value:
    x, extra = ctx.padded(0)
    include = bool(ctx.attr("count_include_pad", 0))
    if extra is not None and not include:
        raise Refused("it averages a Pad's zeros but leaves padding out of its divisor",
                      expected="count_include_pad=1 after a Pad")
    kernel, strides, pads = _window(ctx, x)
    pads = with_pad(pads, extra)
    ceil = bool(ctx.attr("ceil_mode", 0))
    sizes = x.shape[1:]
    want = [_onnx_out(n, kernel[i], strides[i], pads[i], pads[i + 2], ceil) for i, n in enumerate(sizes)]
    if want == [1, 1] and not include and pads[:2] == [0, 0] and all(k >= n for k, n in zip(kernel, sizes)):
        return ctx.add("AdaptiveAvgPool2d", {"output_size": [1, 1]}, [x])
    padding = symmetric(pads, "pooling")
    got = [conv_out(n, kernel[i], strides[i], padding[i], ceil=ceil) for i, n in enumerate(sizes)]
    if got != want:
        raise Refused(f"ceil_mode's last window starts in the padding ({want} windows, torch keeps {got})",
                      expected="windows that start inside the input")
    return ctx.add("AvgPool2d", {"kernel_size": kernel, "stride": strides, "padding": padding, "ceil_mode": ceil,
                                 "count_include_pad": include}, [x])


@imports("GlobalAveragePool")
def global_average_pool(ctx: NodeContext) -> Value:
    """Kept (C, 1, 1) as ONNX has it: an adaptive pool to 1×1 (a Flatten or Reshape usually follows)."""
    x = ctx.value(0)
    if len(x.shape) == 2:  # a signal (C, L) → (C, 1)
        return ctx.add("Reshape", {"shape": [x.shape[0], 1]}, [ctx.add("GlobalAvgPool", {}, [x])], suffix="_flat")
    return ctx.add("AdaptiveAvgPool2d", {"output_size": [1, 1]}, [x])


@imports("Gather")
def gather(ctx: NodeContext) -> Value:
    """``x[:, 0]`` of a sequence (T, F): its first position (ViT's class token), SequencePool(mode='first');
    or the rows of a constant (V, E) table at token ids computed by the network: an Embedding."""
    table = ctx.const(0)
    if table is not None and table.ndim == 2 and not isinstance(ctx.inputs[1], np.ndarray) \
            and int(ctx.attr("axis", 0)) == 0:
        ids = ctx.value(1)
        return ctx.add("Embedding", {"num_embeddings": int(table.shape[0]), "embedding_dim": int(table.shape[1])},
                       [ids], {"weight": table.astype(np.float32)})
    x, index = ctx.value(0), ctx.const(1)
    axis = int(ctx.attr("axis", 0)) % (len(x.shape) + 1)
    if len(x.shape) != 2 or axis != 1 or index is None or index.shape != () or int(index) != 0:
        got = "a computed index" if index is None else f"index {np.asarray(index).tolist()}"
        raise Refused(f"it gathers {got} along axis {axis} of {x.shape}",
                      expected="the first position of a sequence (T, F): a scalar index 0 along axis 1")
    return ctx.add("SequencePool", {"mode": "first"}, [x])
