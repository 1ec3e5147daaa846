"""Pooling: windowed (modules), adaptive, global and over time (tensor reductions)."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.torch._common import layer, module, register


@register("MaxPool2d", "AvgPool2d")
def pool2d(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"kernel_size": p["kernel_size"]}
    if p["stride"] is not None and p["stride"] != p["kernel_size"]:
        kwargs["stride"] = p["stride"]
    if p["padding"] != (0, 0):
        kwargs["padding"] = p["padding"]
    if p["ceil_mode"]:
        kwargs["ceil_mode"] = True
    if not p.get("count_include_pad", True):
        kwargs["count_include_pad"] = False
    return layer(ctx, call(module(ctx), ctx.in_names[0]), call(f"nn.{ctx.node.op}", **kwargs))


@register("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(ctx: ConvertContext) -> MappedLayer:
    ctor = call("nn.AdaptiveAvgPool2d", output_size=ctx.params["output_size"])
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("GlobalAvgPool")
def global_avg_pool(ctx: ConvertContext) -> MappedLayer:
    dims = (2, 3) if len(ctx.in_shapes[0]) == 3 else 2
    return layer(ctx, call(f"{ctx.in_names[0]}.mean", dim=dims))


@register("SequencePool")
def sequence_pool(ctx: ConvertContext) -> MappedLayer:
    if ctx.params["mode"] == "first":
        return layer(ctx, f"{ctx.in_names[0]}[:, 0]")
    reduce = "mean" if ctx.params["mode"] == "mean" else "amax"
    return layer(ctx, call(f"{ctx.in_names[0]}.{reduce}", dim=1))
