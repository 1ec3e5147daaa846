"""Images as token sequences, channels-last: a patch embedding is a ``Conv2D`` with kernel = stride =
the patch on the channels-last image, whose (N, H', W', E) output reshaped to (N, H'·W', E) is
already torch's row-major token order; the class token is the helper layer ``ClassToken``."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CANON, CL, construct, initializer, layer, module, register, take, weight


@register("PatchEmbed")
def patch_embed(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    tokens, width = ctx.out_shape
    kwargs: dict[str, Any] = {"strides": p["patch_size"]}
    if not p["bias"]:
        kwargs["use_bias"] = False
    bias_init = {"bias_initializer": initializer(ctx, "bias")} if p["bias"] else {}
    ctor = construct("layers.Conv2D", [literal(width), literal(p["patch_size"])], kwargs,
                     {"kernel_initializer": initializer(ctx, "weight"), **bias_init})
    helpers: set[str] = {"oihw_to_hwio", "hwio_to_oihw"}
    x = take(ctx, 0, CL, helpers)
    forward = call("ops.reshape", call(module(ctx), x), literal((-1, tokens, width)))
    weights = [weight(ctx, "kernel", "weight", "oihw_to_hwio", "hwio_to_oihw")]
    if p["bias"]:
        weights.append(weight(ctx, "bias", "bias"))
    return layer(ctx, forward, ctor, layout=CANON, weights=weights, helpers=sorted(helpers))


@register("ClassToken")
def class_token(ctx: ConvertContext) -> MappedLayer:
    helpers: set[str] = {"ClassToken"}
    x = take(ctx, 0, CANON, helpers)
    ctor = call("ClassToken", literal(ctx.in_shapes[0][1]))
    return layer(ctx, call(module(ctx), x), ctor, layout=CANON, weights=[weight(ctx, "token", "token")],
                 helpers=sorted(helpers))
