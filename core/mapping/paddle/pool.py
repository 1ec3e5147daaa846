"""Pooling: windowed (layers), adaptive, global and over time (tensor reductions).

Two differences from torch are bridged here:
- average pooling counts the padding as zeros (torch's ``count_include_pad=True``), which in
  paddle is ``exclusive=False``;
- with ``ceil_mode`` torch drops a last window that would start in the right padding, paddle
  keeps it. Where that changes the size, the extra row/column is sliced off (the windows
  that remain are the same in both).
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.paddle._common import layer, module, pair_or_int, register


def _paddle_ceil_size(size: int, k: int, s: int, pad: int) -> int:
    return -(-(size + 2 * pad - k) // s) + 1


@register("MaxPool2d", "AvgPool2d")
def pool2d(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kernel = p["kernel_size"]
    stride = p["stride"] or kernel
    kwargs: dict[str, Any] = {"kernel_size": pair_or_int(kernel)}
    # paddle's stride defaults to the kernel size too, but saying it reads better
    kwargs["stride"] = pair_or_int(stride)
    if p["padding"] != (0, 0):
        kwargs["padding"] = pair_or_int(p["padding"])
    if p["ceil_mode"]:
        kwargs["ceil_mode"] = True
    if ctx.node.op == "AvgPool2d" and (p["padding"] != (0, 0) or p["ceil_mode"]) and p["count_include_pad"]:
        kwargs["exclusive"] = False  # padding counts as zeros, as in torch (paddle's default excludes it)
    cls = "nn.MaxPool2D" if ctx.node.op == "MaxPool2d" else "nn.AvgPool2D"
    forward = call(module(ctx), ctx.in_names[0])
    if ctx.node.op == "MaxPool2d":
        # max_pool2d_with_index: paddle's own kernel on every device. Plain max pooling takes oneDNN's
        # when a user turns oneDNN on, and that backward gives wrong gradients, different in every run,
        # inside a static graph (paddle 3.3; docs/performance.md)
        kwargs["return_mask"] = True
        forward = f"{forward}[0]"
    if p["ceil_mode"]:
        _, h, w = ctx.in_shapes[0]
        _, oh, ow = ctx.out_shape
        ph = _paddle_ceil_size(h, kernel[0], stride[0], p["padding"][0])
        pw = _paddle_ceil_size(w, kernel[1], stride[1], p["padding"][1])
        if (ph, pw) != (oh, ow):
            forward = f"{forward}[:, :, :{oh}, :{ow}]"  # torch drops a window that starts in the padding
    return layer(ctx, forward, call(cls, **kwargs))


@register("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(ctx: ConvertContext) -> MappedLayer:
    ctor = call("nn.AdaptiveAvgPool2D", output_size=pair_or_int(ctx.params["output_size"]))
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("GlobalAvgPool")
def global_avg_pool(ctx: ConvertContext) -> MappedLayer:
    axes = [2, 3] if len(ctx.in_shapes[0]) == 3 else 2
    return layer(ctx, call(f"{ctx.in_names[0]}.mean", axis=axes))


@register("SequencePool")
def sequence_pool(ctx: ConvertContext) -> MappedLayer:
    if ctx.params["mode"] == "first":
        return layer(ctx, f"{ctx.in_names[0]}[:, 0]")
    reduce = "mean" if ctx.params["mode"] == "mean" else "max"
    return layer(ctx, call(f"{ctx.in_names[0]}.{reduce}", axis=1))
