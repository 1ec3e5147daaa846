"""Convolutions. in_channels is always taken from the input."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from core.ops.registry import (
    Op,
    Param,
    ShapeError,
    Tensor,
    Weight,
    bool_param,
    conv_out,
    expect_rank,
    register_op,
    same_out,
    uniform,
)

_OUT = Param("out_channels", "int", example=32, minimum=1, maximum=65_536, help="Number of output channels (filters).")
_GROUPS = Param("groups", "int", 1, minimum=1, maximum=65_536,
                help="Split channels into groups (groups = channels makes a depthwise convolution).")
_BIAS = bool_param("bias", True, "Add a learned bias (usually off before a BatchNorm).")
# How the layer's weights start, in every framework's program (core/mapping/init.py reads the declaration)
INITS = ("uniform", "he")
_INIT = Param("init", "choice", "uniform", choices=INITS,
              help="Starting weights: 'uniform' U(±1/√fan_in) for weight and bias (torch's default); 'he' "
                   "N(0, 2/fan_in) and a zero bias (He et al. 2015), which keeps a ReLU network's activations "
                   "at one scale layer after layer: deep nets without normalisation layers, such as the U-Net, "
                   "need it to start learning.")


def _check_groups(cin: int, p: dict[str, Any]) -> None:
    g = p["groups"]
    if cin % g or p["out_channels"] % g:
        raise ShapeError(f"groups={g} does not divide in_channels={cin} and out_channels={p['out_channels']}",
                         expected="groups dividing both channel counts", field="groups")


def _conv_weights(weight: tuple[int, ...], fan_in: int, out: int, bias: bool, init: str) -> dict[str, Weight]:
    """The kernel and bias as ``init`` starts them. torch's default U(±1/√fan_in) has a third of the
    variance 1/fan_in, so through a ReLU (which halves the mean square) each layer passes on a sixth of
    its input's mean square: after the 18 convolutions with ReLUs on the U-Net's deepest path, under
    6⁻¹⁸ of the image's is left in the scores, swamped by the biases'. He's N(0, 2/fan_in) passes it on whole."""
    if init == "he":
        weights = {"weight": Weight(weight, "normal", fan_in=fan_in, std=math.sqrt(2.0 / fan_in))}
        if bias:
            weights["bias"] = Weight((out,), "zeros")
        return weights
    weights = {"weight": uniform(*weight, fan_in=fan_in)}
    if bias:
        weights["bias"] = uniform(out, fan_in=fan_in)
    return weights


def _too_small(dims: Sequence[int], x: Tensor) -> ShapeError:
    return ShapeError(f"the output would be empty ({'×'.join(map(str, dims))}) for input {x}",
                      expected="a kernel no larger than the (padded) input",
                      fix="use a smaller kernel or stride, add padding, or remove a pooling layer upstream")


@register_op
class Conv2d(Op):
    name = "Conv2d"
    family = "conv"
    reads_channels = True
    help = "2-d convolution over (C, H, W). padding: an int, [h, w], 'same' or 'valid'."
    params = (
        _OUT,
        Param("kernel_size", "int_pair", example=3, minimum=1, maximum=1024, help="Kernel size, e.g. 3 or [3, 5]."),
        Param("stride", "int_pair", 1, minimum=1, maximum=1024, help="Stride."),
        Param("padding", "padding", 0, minimum=0, maximum=1024, help="Zero padding on each side, or 'same'/'valid'."),
        Param("dilation", "int_pair", 1, minimum=1, maximum=1024, help="Spacing between kernel elements."),
        _GROUPS,
        _BIAS,
        _INIT,
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [3], "an image (C, H, W)")
        c, h, w = x.shape
        _check_groups(c, p)
        if p["padding"] == "same":
            if p["dilation"] != (1, 1) and p["stride"] != (1, 1):
                raise ShapeError("padding='same' with both stride and dilation above 1 is not supported",
                                 expected="stride 1 or dilation 1", field="padding")
            oh, ow = same_out(h, p["stride"][0]), same_out(w, p["stride"][1])
        else:
            pad = (0, 0) if p["padding"] == "valid" else p["padding"]
            oh = conv_out(h, p["kernel_size"][0], p["stride"][0], pad[0], p["dilation"][0])
            ow = conv_out(w, p["kernel_size"][1], p["stride"][1], pad[1], p["dilation"][1])
        if oh < 1 or ow < 1:
            raise _too_small((oh, ow), x)
        return Tensor((p["out_channels"], oh, ow))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        per_group = inputs[0].shape[0] // p["groups"]
        return _conv_weights((p["out_channels"], per_group, *p["kernel_size"]),
                             per_group * math.prod(p["kernel_size"]), p["out_channels"], p["bias"], p["init"])

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        cin = inputs[0].shape[0]
        kh, kw = p["kernel_size"]
        return out.numel * (cin // p["groups"]) * kh * kw


@register_op
class Conv1d(Op):
    name = "Conv1d"
    family = "conv"
    reads_channels = True
    help = "1-d convolution over (C, L). padding: an int, 'same' or 'valid'."
    params = (
        _OUT,
        Param("kernel_size", "int", example=3, minimum=1, maximum=65_536, help="Kernel size."),
        Param("stride", "int", 1, minimum=1, maximum=65_536, help="Stride."),
        Param("padding", "padding", 0, minimum=0, maximum=65_536, help="Zero padding on each side, or 'same'/'valid'."),
        Param("dilation", "int", 1, minimum=1, maximum=65_536, help="Spacing between kernel elements."),
        _GROUPS,
        _BIAS,
        _INIT,
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2], "a signal (C, L)")
        c, length = x.shape
        _check_groups(c, p)
        if p["padding"] == "same":
            if p["dilation"] != 1 and p["stride"] != 1:
                raise ShapeError("padding='same' with both stride and dilation above 1 is not supported",
                                 expected="stride 1 or dilation 1", field="padding")
            out = same_out(length, p["stride"])
        else:
            pad = 0 if p["padding"] == "valid" else p["padding"][0]
            if p["padding"] not in ("valid",) and p["padding"][0] != p["padding"][1]:
                raise ShapeError("Conv1d takes one padding value", expected="an integer", field="padding")
            out = conv_out(length, p["kernel_size"], p["stride"], pad, p["dilation"])
        if out < 1:
            raise _too_small((out,), x)
        return Tensor((p["out_channels"], out))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        per_group = inputs[0].shape[0] // p["groups"]
        return _conv_weights((p["out_channels"], per_group, p["kernel_size"]), per_group * p["kernel_size"],
                             p["out_channels"], p["bias"], p["init"])

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        return out.numel * (inputs[0].shape[0] // p["groups"]) * p["kernel_size"]


@register_op
class ConvTranspose2d(Op):
    name = "ConvTranspose2d"
    family = "conv"
    reads_channels = True
    help = "Transposed 2-d convolution (learned up-sampling): out = (in−1)·stride − 2·padding + kernel + output_padding."
    params = (
        _OUT,
        Param("kernel_size", "int_pair", example=3, minimum=1, maximum=1024, help="Kernel size."),
        Param("stride", "int_pair", 1, minimum=1, maximum=1024, help="Stride (up-sampling factor)."),
        Param("padding", "int_pair", 0, minimum=0, maximum=1024, help="Cropped from each side of the output."),
        Param("output_padding", "int_pair", 0, minimum=0, maximum=1023, help="Extra rows/columns on one side."),
        _BIAS,
        _INIT,
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [3], "an image (C, H, W)")
        _, h, w = x.shape
        for i in (0, 1):
            if p["output_padding"][i] >= p["stride"][i]:
                raise ShapeError(f"output_padding {p['output_padding'][i]} is not smaller than stride "
                                 f"{p['stride'][i]}", expected="output_padding < stride", field="output_padding")
        oh, ow = ((size - 1) * p["stride"][i] - 2 * p["padding"][i] + p["kernel_size"][i] + p["output_padding"][i]
                  for i, size in ((0, h), (1, w)))
        if oh < 1 or ow < 1:
            raise _too_small((oh, ow), x)
        return Tensor((p["out_channels"], oh, ow))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        """Torch keeps a transposed kernel as (in, out, kh, kw) and takes its fan-in from out·kh·kw."""
        fan_in = p["out_channels"] * math.prod(p["kernel_size"])
        return _conv_weights((inputs[0].shape[0], p["out_channels"], *p["kernel_size"]), fan_in,
                             p["out_channels"], p["bias"], p["init"])

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        return inputs[0].numel * p["out_channels"] * math.prod(p["kernel_size"])
