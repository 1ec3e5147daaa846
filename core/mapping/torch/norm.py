"""Batch, layer and group normalisation (the op catalogue uses torch's conventions already)."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


def _options(p: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k, v in defaults.items() if p[k] != v}


@register("BatchNorm1d", "BatchNorm2d")
def batch_norm(ctx: ConvertContext) -> MappedLayer:
    kwargs = _options(ctx.params, {"eps": 1e-5, "momentum": 0.1, "affine": True})
    ctor = call(f"nn.{ctx.node.op}", literal(ctx.in_shapes[0][0]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("LayerNorm")
def layer_norm(ctx: ConvertContext) -> MappedLayer:
    kwargs = _options(ctx.params, {"eps": 1e-5, "elementwise_affine": True})
    ctor = call("nn.LayerNorm", literal(ctx.in_shapes[0][-1]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("GroupNorm")
def group_norm(ctx: ConvertContext) -> MappedLayer:
    kwargs = _options(ctx.params, {"eps": 1e-5, "affine": True})
    ctor = call("nn.GroupNorm", literal(ctx.params["num_groups"]), literal(ctx.in_shapes[0][0]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
