"""Convolutions, channels-last.

Padding: torch pads explicitly and symmetrically; Keras knows only 'valid' and 'same'
(TensorFlow's rule: total = max((ceil(n/s) − 1)·s + d·(k − 1) + 1 − n, 0), the odd pixel at
the end). An explicit padding becomes ``padding='same'`` when that rule yields exactly the
same windows (e.g. 3×3, stride 1, padding 1), otherwise ``ops.pad`` + ``'valid'``.
A padding of 'same' in the spec already means TensorFlow's rule (the torch mapper pads to
match it). Keras refuses stride > 1 together with dilation > 1, so that case runs the
dilated convolution with stride 1 and keeps every s-th output (the same windows).

groups = in_channels becomes a ``DepthwiseConv2D``/``DepthwiseConv1D`` (Keras's native
depthwise kernel); other groups use ``Conv2D(groups=…)``.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import (
    CL,
    KerasWeight,
    arr,
    construct,
    initializer,
    key,
    layer,
    module,
    register,
    take,
    weight,
)


def _pair(v: Any, dims: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, tuple) else (v,) * dims


def same_matches(size: int, k: int, s: int, d: int, pad: int) -> bool:
    """Whether Keras 'same' gives the windows of a symmetric torch padding ``pad``."""
    eff = d * (k - 1) + 1
    out_tf = -(-size // s)
    total = max((out_tf - 1) * s + eff - size, 0)
    out_torch = (size + 2 * pad - eff) // s + 1
    return total // 2 == pad and out_tf == out_torch


def _geometry(ctx: ConvertContext, dims: int) -> tuple[str, tuple[int, ...] | None, tuple[int, ...]]:
    """(Keras padding mode, explicit symmetric padding or None, Keras strides)."""
    p = ctx.params
    stride, kernel, dilation = _pair(p["stride"], dims), _pair(p["kernel_size"], dims), _pair(p["dilation"], dims)
    pad = p["padding"]
    if pad in ("same", "valid"):
        return str(pad), None, stride
    pads = _pair(pad, dims)[:dims]
    if all(v == 0 for v in pads):
        return "valid", None, stride
    sizes = ctx.in_shapes[0][1:]
    if all(same_matches(n, k, s, d, q) for n, k, s, d, q in zip(sizes, kernel, stride, dilation, pads)):
        return "same", None, stride
    return "valid", pads, stride


def _conv(ctx: ConvertContext, dims: int) -> MappedLayer:
    p = ctx.params
    cin = ctx.in_shapes[0][0]
    groups, out = p["groups"], p["out_channels"]
    kernel, dilation = _pair(p["kernel_size"], dims), _pair(p["dilation"], dims)
    mode, pads, stride = _geometry(ctx, dims)
    subsample = None
    if any(s > 1 for s in stride) and any(d > 1 for d in dilation):
        subsample, stride = stride, (1,) * dims
    depthwise = groups == cin and groups > 1
    suffix = "2D" if dims == 2 else "1D"
    kwargs: dict[str, Any] = {}
    if any(s != 1 for s in stride):
        kwargs["strides"] = stride if dims == 2 else stride[0]
    if mode != "valid":
        kwargs["padding"] = mode
    if any(d != 1 for d in dilation):
        kwargs["dilation_rate"] = dilation if dims == 2 else dilation[0]
    if groups > 1 and not depthwise:
        kwargs["groups"] = groups
    if not p["bias"]:
        kwargs["use_bias"] = False
    k = literal(kernel if dims == 2 else kernel[0])
    bias_init = {"bias_initializer": initializer(ctx, "bias")} if p["bias"] else {}
    helpers: set[str] = set()
    if depthwise:
        mult = out // cin
        if mult != 1:
            kwargs = {"depth_multiplier": mult, **kwargs}
        ctor = construct(f"layers.DepthwiseConv{suffix}", [k], kwargs,
                         {"depthwise_initializer": initializer(ctx, "weight"), **bias_init})
        to_keras, to_canon = f"depthwise_kernel_from_torch{dims}d", f"depthwise_kernel_to_torch{dims}d"
        kernel_w = KerasWeight("kernel", f"{to_keras}({arr(ctx, 'weight')}, {literal(cin)})",
                               ((key(ctx, "weight"), f"{to_canon}({{v}})"),), to_keras)
    else:
        ctor = construct(f"layers.Conv{suffix}", [literal(out), k], kwargs,
                         {"kernel_initializer": initializer(ctx, "weight"), **bias_init})
        to_keras, to_canon = (("oihw_to_hwio", "hwio_to_oihw") if dims == 2 else ("oil_to_lio", "oil_to_lio"))
        kernel_w = weight(ctx, "kernel", "weight", to_keras, to_canon)
    helpers.update({to_keras, to_canon})
    x = take(ctx, 0, CL, helpers)
    if pads is not None:
        widths = ((0, 0),) + tuple((q, q) for q in pads) + ((0, 0),)
        x = call("ops.pad", x, literal(widths))
    forward = call(module(ctx), x)
    if subsample is not None:
        forward += "[:, " + ", ".join(f"::{s}" for s in subsample) + ", :]"
    weights = [kernel_w] + ([weight(ctx, "bias", "bias")] if p["bias"] else [])
    return layer(ctx, forward, ctor, layout=CL, weights=weights, helpers=sorted(helpers))


@register("Conv2d")
def conv2d(ctx: ConvertContext) -> MappedLayer:
    return _conv(ctx, 2)


@register("Conv1d")
def conv1d(ctx: ConvertContext) -> MappedLayer:
    return _conv(ctx, 1)


@register("ConvTranspose2d")
def conv_transpose2d(ctx: ConvertContext) -> MappedLayer:
    """``Conv2DTranspose`` with an explicit output_padding follows torch's size rule with padding 0:
    (n − 1)·s + k + output_padding; torch's ``padding`` then crops that many rows/columns per side."""
    p = ctx.params
    _, h, w = ctx.in_shapes[0]
    out = p["out_channels"]
    kwargs: dict[str, Any] = {}
    if p["stride"] != (1, 1):
        kwargs["strides"] = p["stride"]
    kwargs["output_padding"] = p["output_padding"]
    if not p["bias"]:
        kwargs["use_bias"] = False
    bias_init = {"bias_initializer": initializer(ctx, "bias")} if p["bias"] else {}
    ctor = construct("layers.Conv2DTranspose", [literal(out), literal(p["kernel_size"])], kwargs,
                     {"kernel_initializer": initializer(ctx, "weight"), **bias_init})
    helpers: set[str] = {"oihw_to_hwio", "hwio_to_oihw"}
    forward = call(module(ctx), take(ctx, 0, CL, helpers))
    ph, pw = p["padding"]
    if ph or pw:
        full = [(n - 1) * s + k + op for n, s, k, op in
                zip((h, w), p["stride"], p["kernel_size"], p["output_padding"])]
        forward += f"[:, {ph}:{full[0] - ph}, {pw}:{full[1] - pw}, :]"
    # torch (I, O, kh, kw) → Keras (kh, kw, O, I) is the same axis move as a convolution's OIHW → HWIO
    weights = [weight(ctx, "kernel", "weight", "oihw_to_hwio", "hwio_to_oihw")]
    if p["bias"]:
        weights.append(weight(ctx, "bias", "bias"))
    return layer(ctx, forward, ctor, layout=CL, weights=weights, helpers=sorted(helpers))
