"""Pooling: windowed, adaptive and global."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, bool_param, conv_out, expect_rank, register_op


class _Pool2d(Op):
    family = "pool"
    reads_channels = True
    params = (
        Param("kernel_size", "int_pair", example=2, minimum=1, maximum=1024, help="Window size."),
        Param("stride", "int_pair", None, optional=True, minimum=1, maximum=1024,
              help="Step between windows; empty = kernel_size."),
        Param("padding", "int_pair", 0, minimum=0, maximum=512, help="Implicit padding on each side."),
        bool_param("ceil_mode", False, "Round the output size up instead of down."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [3], "an image (C, H, W)")
        c, h, w = x.shape
        k, pad = p["kernel_size"], p["padding"]
        s = p["stride"] or k
        for i in (0, 1):
            if pad[i] * 2 > k[i]:
                raise ShapeError(f"padding {pad[i]} is more than half the window {k[i]}",
                                 expected="padding ≤ kernel_size / 2", field="padding")
        oh = conv_out(h, k[0], s[0], pad[0], ceil=p["ceil_mode"])
        ow = conv_out(w, k[1], s[1], pad[1], ceil=p["ceil_mode"])
        if oh < 1 or ow < 1:
            raise ShapeError(f"the {k[0]}×{k[1]} window does not fit the input {x}",
                             expected="a window no larger than the input",
                             fix="use a smaller window or remove a down-sampling layer upstream")
        return Tensor((c, oh, ow))


@register_op
class MaxPool2d(_Pool2d):
    name = "MaxPool2d"
    help = "Maximum over each window."


@register_op
class AvgPool2d(_Pool2d):
    name = "AvgPool2d"
    help = "Mean over each window (padding counts as zeros unless count_include_pad is false)."
    params = _Pool2d.params + (
        bool_param("count_include_pad", True, "Count the zero padding in each window's divisor (torch's default); "
                   "false: average the input cells only (ONNX's default)."),)


@register_op
class AdaptiveAvgPool2d(Op):
    name = "AdaptiveAvgPool2d"
    family = "pool"
    reads_channels = True
    help = "Average-pools to a fixed output size whatever the input size (torch's window rule in every framework)."
    params = (Param("output_size", "int_pair", 1, minimum=1, maximum=4096, help="Output [h, w]."),)

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [3], "an image (C, H, W)")
        return Tensor((x.shape[0],) + tuple(p["output_size"]))


@register_op
class GlobalAvgPool(Op):
    name = "GlobalAvgPool"
    family = "pool"
    reads_channels = True
    help = "Mean over all spatial positions: (C, H, W) or (C, L) → (C)."

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2, 3], "an image (C, H, W) or a signal (C, L)")
        return Tensor((x.shape[0],))


@register_op
class SequencePool(Op):
    name = "SequencePool"
    family = "pool"
    help = ("Reduces a sequence (T, F) to (F) by the mean or the maximum over time, or takes its first "
            "position (a class token).")
    params = (Param("mode", "choice", "mean", choices=("mean", "max", "first"),
                    help="'mean' or 'max' over time, or 'first': the first position (ViT's class token)."),)

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2], "a sequence (T, F)")
        return Tensor((x.shape[1],))
