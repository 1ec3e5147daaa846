"""Pooling, channels-last.

Max pooling: Keras 'same' is used when it yields torch's windows; otherwise the input is
padded with −∞ (torch's implicit padding never wins a max) — on the right also by the extra
windows ``ceil_mode`` adds — and pooled 'valid'.
Average pooling: torch counts the zero padding in the divisor (count_include_pad) but not
the part of a ``ceil_mode`` window that hangs past the padding; the input is zero-padded and
the few border outputs whose divisor is smaller are rescaled by a constant factor.
AdaptiveAvgPool2d: a plain AveragePooling2D when the input divides evenly; otherwise torch's
windows (start ⌊i·n/o⌋, end ⌈(i+1)·n/o⌉) are separable row/column averages, computed exactly
as ``einsum`` with two constant averaging matrices.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CANON, CL, layer, module, register, take
from core.ops.registry import conv_out


def _window(ctx: ConvertContext) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    p = ctx.params
    k = p["kernel_size"]
    s = p["stride"] or k
    sizes = ctx.in_shapes[0][1:]
    outs = tuple(conv_out(n, k[i], s[i], p["padding"][i], ceil=p["ceil_mode"]) for i, n in enumerate(sizes))
    return k, s, p["padding"], outs  # type: ignore[return-value]


def _extra(n: int, k: int, s: int, pad: int, out: int) -> int:
    """Rows past the right padding that ceil_mode's last window reaches."""
    return max((out - 1) * s + k - (n + 2 * pad), 0)


def _tf_same(n: int, k: int, s: int, pad: int, out: int) -> bool:
    """Whether Keras 'same' max pooling has torch's windows (same first offset, same count)."""
    out_tf = -(-n // s)
    total = max((out_tf - 1) * s + k - n, 0)
    return total // 2 == pad and out_tf == out


def _pool_ctor(cls: str, k: tuple[int, int], s: tuple[int, int], padding: str) -> str:
    kwargs: dict[str, Any] = {}
    if s != k:
        kwargs["strides"] = s
    if padding != "valid":
        kwargs["padding"] = padding
    return call(cls, literal(k), **kwargs)


@register("MaxPool2d")
def max_pool2d(ctx: ConvertContext) -> MappedLayer:
    k, s, pad, outs = _window(ctx)
    sizes = ctx.in_shapes[0][1:]
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    extra = [_extra(n, k[i], s[i], pad[i], outs[i]) for i, n in enumerate(sizes)]
    if pad == (0, 0) and extra == [0, 0]:
        return layer(ctx, call(module(ctx), x), _pool_ctor("layers.MaxPooling2D", k, s, "valid"), layout=CL,
                     helpers=sorted(helpers))
    if all(_tf_same(n, k[i], s[i], pad[i], outs[i]) for i, n in enumerate(sizes)):
        return layer(ctx, call(module(ctx), x), _pool_ctor("layers.MaxPooling2D", k, s, "same"), layout=CL,
                     helpers=sorted(helpers))
    widths = ((0, 0), (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]), (0, 0))
    padded = call("ops.pad", x, literal(widths), "constant_values=-math.inf")
    return layer(ctx, call(module(ctx), padded), _pool_ctor("layers.MaxPooling2D", k, s, "valid"), layout=CL,
                 helpers=sorted(helpers))


def _divisors(n: int, k: int, s: int, pad: int, out: int) -> list[int]:
    """torch's avg_pool2d divisor per output row with count_include_pad=True."""
    return [min(i * s - pad + k, n + pad) - (i * s - pad) for i in range(out)]


def _inside(n: int, k: int, s: int, pad: int, out: int) -> list[int]:
    """torch's avg_pool2d divisor per output row with count_include_pad=False: the input cells only."""
    return [min(i * s - pad + k, n) - max(i * s - pad, 0) for i in range(out)]


@register("AvgPool2d")
def avg_pool2d(ctx: ConvertContext) -> MappedLayer:
    k, s, pad, outs = _window(ctx)
    sizes = ctx.in_shapes[0][1:]
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    extra = [_extra(n, k[i], s[i], pad[i], outs[i]) for i, n in enumerate(sizes)]
    if pad != (0, 0) or extra != [0, 0]:
        widths = ((0, 0), (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]), (0, 0))
        x = call("ops.pad", x, literal(widths))
    forward = call(module(ctx), x)
    divisors = _divisors if ctx.params["count_include_pad"] else _inside
    rows, cols = (divisors(n, k[i], s[i], pad[i], outs[i]) for i, n in enumerate(sizes))
    if any(d != k[0] for d in rows) or any(d != k[1] for d in cols):
        # border windows (ceil_mode's, or all padded ones without count_include_pad) cover fewer cells
        # than k·k: rescale them as torch divides
        row_scale = tuple(float(k[0] / d) for d in rows)
        col_scale = tuple(float(k[1] / d) for d in cols)
        forward = call("rescale_border", forward, literal(row_scale), literal(col_scale))
        helpers.add("rescale_border")
    return layer(ctx, forward, _pool_ctor("layers.AveragePooling2D", k, s, "valid"), layout=CL,
                 helpers=sorted(helpers))


@register("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(ctx: ConvertContext) -> MappedLayer:
    _, h, w = ctx.in_shapes[0]
    oh, ow = ctx.params["output_size"]
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    if h % oh == 0 and w % ow == 0:
        ctor = _pool_ctor("layers.AveragePooling2D", (h // oh, w // ow), (h // oh, w // ow), "valid")
        return layer(ctx, call(module(ctx), x), ctor, layout=CL, helpers=sorted(helpers))
    helpers.add("adaptive_avg_pool2d")
    forward = call("adaptive_avg_pool2d", x, literal((oh, ow)))
    return layer(ctx, forward, layout=CL, helpers=sorted(helpers))


@register("GlobalAvgPool")
def global_avg_pool(ctx: ConvertContext) -> MappedLayer:
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    axes = (1, 2) if len(ctx.in_shapes[0]) == 3 else 1
    return layer(ctx, call("ops.mean", x, axis=axes), layout=CANON, helpers=sorted(helpers))


@register("SequencePool")
def sequence_pool(ctx: ConvertContext) -> MappedLayer:
    helpers: set[str] = set()
    x = take(ctx, 0, CANON, helpers)
    if ctx.params["mode"] == "first":
        return layer(ctx, f"{x}[:, 0]", layout=CANON, helpers=sorted(helpers))
    reduce = "ops.mean" if ctx.params["mode"] == "mean" else "ops.max"
    return layer(ctx, call(reduce, x, axis=1), layout=CANON, helpers=sorted(helpers))
