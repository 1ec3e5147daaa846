"""Convolutions. ``padding='same'`` with a stride above 1 is padded explicitly with
``F.pad`` (torch refuses it), using the TensorFlow rule that Keras and paddle follow:
total = max((ceil(n/s) − 1)·s + d·(k − 1) + 1 − n, 0), the odd pixel at the end."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


def same_padding(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """(before, after) padding that makes a strided convolution 'same' (TensorFlow's rule)."""
    out = -(-size // s)
    total = max((out - 1) * s + d * (k - 1) + 1 - size, 0)
    return total // 2, total - total // 2


def _as_tuple(value: int | tuple[int, ...]) -> tuple[int, ...]:
    return value if isinstance(value, tuple) else (value,)


def _padding(ctx: ConvertContext, dims: int) -> tuple[Any, tuple[int, ...] | None]:
    """(the ctor's ``padding`` value, the F.pad widths or None)."""
    p = ctx.params
    pad = p["padding"]
    if pad == "valid":
        return 0, None
    stride, kernel, dilation = _as_tuple(p["stride"]), _as_tuple(p["kernel_size"]), _as_tuple(p["dilation"])
    if pad == "same":
        if all(s == 1 for s in stride):
            return "same", None
        sizes = ctx.in_shapes[0][1:]
        pairs = [same_padding(n, k, s, d) for n, k, s, d in zip(sizes, kernel, stride, dilation)]
        if all(a == b for a, b in pairs):
            value = tuple(a for a, _ in pairs)
            return (value if dims == 2 else value[0]), None
        widths: list[int] = []
        for before, after in reversed(pairs):  # F.pad lists the last axis first
            widths += [before, after]
        return 0, tuple(widths)
    return (pad if dims == 2 else pad[0]), None


def _conv(ctx: ConvertContext, cls: str, dims: int) -> MappedLayer:
    p = ctx.params
    padding, explicit = _padding(ctx, dims)
    kwargs: dict[str, Any] = {"kernel_size": p["kernel_size"]}
    defaults = {"stride": (1, 1) if dims == 2 else 1, "dilation": (1, 1) if dims == 2 else 1}
    for name, default in defaults.items():
        if p[name] != default:
            kwargs[name] = p[name]
    if padding not in (0, (0, 0)):
        kwargs["padding"] = padding
    if p["groups"] != 1:
        kwargs["groups"] = p["groups"]
    if not p["bias"]:
        kwargs["bias"] = False
    ctor = call(cls, literal(ctx.in_shapes[0][0]), literal(p["out_channels"]), **kwargs)
    x = ctx.in_names[0]
    if explicit is not None:
        x = call("F.pad", x, literal(explicit))
    return layer(ctx, call(module(ctx), x), ctor)


@register("Conv2d")
def conv2d(ctx: ConvertContext) -> MappedLayer:
    return _conv(ctx, "nn.Conv2d", 2)


@register("Conv1d")
def conv1d(ctx: ConvertContext) -> MappedLayer:
    return _conv(ctx, "nn.Conv1d", 1)


@register("ConvTranspose2d")
def conv_transpose2d(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"kernel_size": p["kernel_size"]}
    for name in ("stride", "padding", "output_padding"):
        if p[name] != ((1, 1) if name == "stride" else (0, 0)):
            kwargs[name] = p[name]
    if not p["bias"]:
        kwargs["bias"] = False
    ctor = call("nn.ConvTranspose2d", literal(ctx.in_shapes[0][0]), literal(p["out_channels"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
