"""Convolutions (paddle kernels are OIHW like torch's; transposed ones (I, O, kh, kw) too).

``padding='same'`` follows the TensorFlow rule, total = max((ceil(n/s) − 1)·s + d·(k − 1) + 1 − n, 0)
with the odd pixel at the end. Paddle's ``padding="same"`` computes it correctly without
dilation but ignores the dilation, so a dilated 'same' convolution gets its padding
worked out here, per side.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import layer, module, pair_or_int, register


def same_padding(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """(before, after) padding that makes a convolution 'same' (TensorFlow's rule)."""
    out = -(-size // s)
    total = max((out - 1) * s + d * (k - 1) + 1 - size, 0)
    return total // 2, total - total // 2


def _as_tuple(value: Any) -> tuple[int, ...]:
    return value if isinstance(value, tuple) else (value,)


def _padding(ctx: ConvertContext) -> Any:
    """The ``padding`` argument: an int, a pair, "same", or per-side [before, after, …] widths."""
    p = ctx.params
    pad = p["padding"]
    if pad == "valid":
        return 0
    if pad == "same":
        dilation = _as_tuple(p["dilation"])
        if all(d == 1 for d in dilation):
            return "same"
        sizes = ctx.in_shapes[0][1:]
        pairs = [same_padding(n, k, s, d) for n, k, s, d in
                 zip(sizes, _as_tuple(p["kernel_size"]), _as_tuple(p["stride"]), dilation)]
        if all(a == b for a, b in pairs):
            return pairs[0][0] if len(set(pairs)) == 1 else tuple(a for a, _ in pairs)
        return [w for pair in pairs for w in pair]  # [top, bottom, left, right] / [left, right]
    if ctx.node.op == "Conv1d":
        return pad[0]
    return pair_or_int(pad)


def _conv(ctx: ConvertContext, cls: str) -> MappedLayer:
    p = ctx.params
    two_d = ctx.node.op == "Conv2d"
    kwargs: dict[str, Any] = {"kernel_size": pair_or_int(p["kernel_size"]) if two_d else p["kernel_size"]}
    for name in ("stride", "dilation"):
        if p[name] not in (1, (1, 1)):
            kwargs[name] = pair_or_int(p[name]) if two_d else p[name]
    padding = _padding(ctx)
    if padding not in (0, (0, 0)):
        kwargs["padding"] = padding
    if p["groups"] != 1:
        kwargs["groups"] = p["groups"]
    if not p["bias"]:
        kwargs["bias_attr"] = False
    ctor = call(cls, literal(ctx.in_shapes[0][0]), literal(p["out_channels"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("Conv2d")
def conv2d(ctx: ConvertContext) -> MappedLayer:
    return _conv(ctx, "nn.Conv2D")


@register("Conv1d")
def conv1d(ctx: ConvertContext) -> MappedLayer:
    return _conv(ctx, "nn.Conv1D")


@register("ConvTranspose2d")
def conv_transpose2d(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"kernel_size": pair_or_int(p["kernel_size"])}
    for name, default in (("stride", (1, 1)), ("padding", (0, 0)), ("output_padding", (0, 0))):
        if p[name] != default:
            kwargs[name] = pair_or_int(p[name])
    if not p["bias"]:
        kwargs["bias_attr"] = False
    ctor = call("nn.Conv2DTranspose", literal(ctx.in_shapes[0][0]), literal(p["out_channels"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
