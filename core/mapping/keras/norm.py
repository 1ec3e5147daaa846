"""Batch and layer normalisation.

BatchNorm → the template's ``BatchNorm`` (a ``layers.BatchNormalization`` on the channel axis,
which is last in Keras) with torch's numbers converted: Keras momentum = 1 − torch momentum,
epsilon given explicitly (Keras's default is 1e-3, torch's 1e-5). Torch updates the running
variance with the *unbiased* batch variance and Keras with the biased one; the template's
``BatchNorm`` subclass applies the n/(n−1) correction to the moving-variance update, so the
statistics evolve as in torch. LayerNorm normalises over the last logical axis, which is
moved with the layout. GroupNorm groups consecutive channels, on the last (channel) axis.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.keras._common import CANON, CL, keras_axis, layer, layout_of, module, register, take, weight


@register("BatchNorm1d", "BatchNorm2d")
def batch_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"momentum": round(1.0 - p["momentum"], 12), "epsilon": p["eps"]}
    if not p["affine"]:
        kwargs.update(center=False, scale=False)
    helpers: set[str] = {"BatchNorm"}
    want = CL if len(ctx.in_shapes[0]) >= 2 else CANON
    x = take(ctx, 0, want, helpers)
    weights = []
    if p["affine"]:
        weights += [weight(ctx, "gamma", "weight"), weight(ctx, "beta", "bias")]
    weights += [weight(ctx, "moving_mean", "running_mean"), weight(ctx, "moving_variance", "running_var")]
    return layer(ctx, call(module(ctx), x, "training=training"), call("BatchNorm", **kwargs), layout=want,
                 weights=weights, helpers=sorted(helpers), training=True)


@register("LayerNorm")
def layer_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    helpers: set[str] = set()
    src = ctx.inputs[0]
    layout = layout_of(src)
    if layout not in (CANON, CL):
        layout = CANON
    x = take(ctx, 0, layout, helpers)
    rank = len(ctx.in_shapes[0])
    kwargs: dict[str, Any] = {}
    axis = keras_axis(rank - 1, rank, layout)
    if axis != -1:
        kwargs["axis"] = axis
    kwargs["epsilon"] = p["eps"]
    weights = []
    if not p["elementwise_affine"]:
        kwargs.update(center=False, scale=False)
    else:
        weights = [weight(ctx, "gamma", "weight"), weight(ctx, "beta", "bias")]
    return layer(ctx, call(module(ctx), x), call("layers.LayerNormalization", **kwargs), layout=layout,
                 weights=weights, helpers=sorted(helpers))


@register("GroupNorm")
def group_norm(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"groups": p["num_groups"], "epsilon": p["eps"]}  # Keras's epsilon default is 1e-3
    if not p["affine"]:
        kwargs.update(center=False, scale=False)
    helpers: set[str] = set()
    x = take(ctx, 0, CL, helpers)
    weights = [weight(ctx, "gamma", "weight"), weight(ctx, "beta", "bias")] if p["affine"] else []
    return layer(ctx, call(module(ctx), x), call("layers.GroupNormalization", **kwargs), layout=CL,
                 weights=weights, helpers=sorted(helpers))
