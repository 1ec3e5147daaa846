"""Batch and layer normalisation.

The op catalogue uses torch's conventions: momentum is the weight of the *new* batch
(torch 0.1 = paddle 0.9) and the running variance is updated with the *unbiased* batch
variance. Paddle updates it with the biased one, so the generated model uses
``UnbiasedBatchNorm1D``/``2D`` (defined in ``model.py``): paddle's fused batch norm, with
the running variance corrected by n/(n−1) afterwards. Paddle keeps the statistics as
``_mean``/``_variance``.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import bind, layer, module, register

_BN_NAMES = {"weight": "weight", "bias": "bias", "running_mean": "_mean", "running_var": "_variance"}


@register("BatchNorm1d", "BatchNorm2d")
def batch_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    cls = "UnbiasedBatchNorm1D" if ctx.node.op == "BatchNorm1d" else "UnbiasedBatchNorm2D"
    kwargs: dict[str, Any] = {}
    if p["momentum"] != 0.1:
        kwargs["momentum"] = round(1.0 - p["momentum"], 12)
    if p["eps"] != 1e-5:
        kwargs["epsilon"] = p["eps"]
    if not p["affine"]:
        kwargs.update(weight_attr=False, bias_attr=False)
    ctor = call(cls, literal(ctx.in_shapes[0][0]), **kwargs)
    names = ["weight", "bias"] if p["affine"] else []
    weights = tuple(bind(ctx, name, _BN_NAMES[name]) for name in names + ["running_mean", "running_var"])
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor, helpers=(cls,), weights=weights)


@register("LayerNorm")
def layer_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {}
    if p["eps"] != 1e-5:
        kwargs["epsilon"] = p["eps"]
    if not p["elementwise_affine"]:
        kwargs.update(weight_attr=False, bias_attr=False)
    ctor = call("nn.LayerNorm", literal(ctx.in_shapes[0][-1]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("GroupNorm")
def group_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {}
    if p["eps"] != 1e-5:
        kwargs["epsilon"] = p["eps"]
    if not p["affine"]:
        kwargs.update(weight_attr=False, bias_attr=False)
    ctor = call("nn.GroupNorm", literal(p["num_groups"]), literal(ctx.in_shapes[0][0]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
