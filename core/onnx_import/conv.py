"""Convolutions: ONNX Conv with 2-d (Conv2d) or 1-d (Conv1d) kernels, weights in torch's layout already."""

from __future__ import annotations

from typing import Any

from core.onnx_import._graph import NodeContext, Refused, Value, imports


def explicit_pads(ctx: NodeContext, sizes: tuple[int, ...], kernel: list[int], strides: list[int],
                  dilations: list[int]) -> list[int]:
    """ONNX ``pads`` (begins then ends), with ``auto_pad`` SAME_UPPER/SAME_LOWER worked out for the static size."""
    auto = ctx.attr("auto_pad", "NOTSET")
    n = len(sizes)
    if auto in ("NOTSET", ""):
        return list(ctx.attr("pads", [0] * 2 * n))
    if auto == "VALID":
        return [0] * 2 * n
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins + ends


def with_pad(pads: list[int], extra: list[int] | None) -> list[int]:
    """``pads`` plus the zero padding of a Pad node before the op."""
    return pads if extra is None else [a + b for a, b in zip(pads, extra)]


def symmetric(pads: list[int], what: str) -> list[int]:
    n = len(pads) // 2
    if pads[:n] != pads[n:]:
        raise Refused(f"its {what} padding {pads} differs between the start and the end of an axis",
                      expected="the same padding at both ends of each axis")
    return pads[:n]


@imports("Conv")
def conv(ctx: NodeContext) -> Value:
    x, extra = ctx.padded(0)
    w = ctx.weight(1, "kernel")
    dims = w.ndim - 2
    if dims not in (1, 2):
        raise Refused(f"a {dims}-d convolution", expected="a 1-d or 2-d convolution")
    kernel = list(w.shape[2:])
    strides = list(ctx.attr("strides", [1] * dims))
    dilations = list(ctx.attr("dilations", [1] * dims))
    pads = symmetric(with_pad(explicit_pads(ctx, x.shape[1:], kernel, strides, dilations), extra), "convolution")
    weights = {"weight": w}
    if len(ctx.inputs) > 2 and ctx.inputs[2] is not None:
        weights["bias"] = ctx.weight(2, "bias")
    params: dict[str, Any] = {"out_channels": int(w.shape[0]), "groups": int(ctx.attr("group", 1)),
                              "bias": "bias" in weights}
    if dims == 2:
        params.update(kernel_size=kernel, stride=strides, padding=pads, dilation=dilations)
        return ctx.add("Conv2d", params, [x], weights)
    params.update(kernel_size=kernel[0], stride=strides[0], padding=pads[0], dilation=dilations[0])
    return ctx.add("Conv1d", params, [x], weights)


@imports("ConvTranspose")
def conv_transpose(ctx: NodeContext) -> Value:
    """A 2-d ConvTranspose (U-Net's learned up-sampling): kernel (in, out, kh, kw) in torch's layout as it is;
    the same padding at both ends of an axis; ``output_shape`` worked out into ``output_padding``."""
    x = ctx.value(0)
    w = ctx.weight(1, "kernel")
    if w.ndim != 4:
        raise Refused(f"a {w.ndim - 2}-d transposed convolution", expected="a 2-d transposed convolution")
    if int(ctx.attr("group", 1)) != 1 or any(d != 1 for d in ctx.attr("dilations", [1, 1])):
        raise Refused(f"group {ctx.attr('group', 1)}, dilations {list(ctx.attr('dilations', [1, 1]))}",
                      expected="group 1 and dilations 1 (ConvTranspose2d has neither)")
    if ctx.attr("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
        raise Refused(f"auto_pad {ctx.attr('auto_pad')}", expected="explicit pads (auto_pad NOTSET) or VALID")
    kernel, strides = [int(k) for k in w.shape[2:]], [int(s) for s in ctx.attr("strides", [1, 1])]
    pads = [0] * 4 if ctx.attr("auto_pad", "NOTSET") == "VALID" else [int(p) for p in ctx.attr("pads", [0] * 4)]
    padding = symmetric(pads, "transposed convolution")
    extra = [int(p) for p in ctx.attr("output_padding", [0, 0])]
    wanted = ctx.attr("output_shape")
    if wanted is not None:  # the size asked for, beyond what the strides give, is output padding
        extra = [int(o) - ((n - 1) * s - 2 * p + k) for o, n, s, p, k in
                 zip(list(wanted)[-2:], x.shape[1:], strides, padding, kernel)]
        if any(e < 0 for e in extra):
            raise Refused(f"output_shape {list(wanted)} is smaller than the convolution gives",
                          expected="an output_shape the pads and strides give (or none)")
    weights = {"weight": w}
    if len(ctx.inputs) > 2 and ctx.inputs[2] is not None:
        weights["bias"] = ctx.weight(2, "bias")
    params: dict[str, Any] = {"out_channels": int(w.shape[1]), "kernel_size": kernel, "stride": strides,
                              "padding": padding, "output_padding": extra, "bias": "bias" in weights}
    return ctx.add("ConvTranspose2d", params, [x], weights)
