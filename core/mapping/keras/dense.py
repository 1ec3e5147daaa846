"""Linear → ``layers.Dense`` (kernel (in, out) = torch weight transposed).

After a Flatten of a channels-last tensor the Dense reads features in (H, W, C) order
instead of torch's (C, H, W); rather than transposing activations at every step, the
loader permutes the kernel's rows once (``dense_kernel_from_channels_first``).
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import (
    CANON,
    FLAT_CL,
    KerasWeight,
    arr,
    construct,
    initializer,
    key,
    layer,
    layout_of,
    module,
    register,
    take,
    weight,
)


@register("Linear")
def linear(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    tied = ctx.tied()
    if tied is not None:  # the head reads the Embedding's table (V, E), transposed in the product
        helpers_: set[str] = {"TiedDense"}
        x = take(ctx, 0, CANON, helpers_)
        fan_in = ctx.in_shapes[0][-1] if p["bias"] else 0
        ctor = call("TiedDense", literal(p["out_features"]), bias_fan_in=fan_in)
        return layer(ctx, call(module(ctx), x, f"self.{tied.var}.embeddings"), ctor, layout=CANON,
                     weights=[weight(ctx, "bias", "bias")] if p["bias"] else [], helpers=sorted(helpers_))
    kwargs: dict[str, Any] = {}
    if not p["bias"]:
        kwargs["use_bias"] = False
    inits = {"kernel_initializer": initializer(ctx, "weight"),
             **({"bias_initializer": initializer(ctx, "bias")} if p["bias"] else {})}
    ctor = construct("layers.Dense", [literal(p["out_features"])], kwargs, inits)
    src = ctx.inputs[0]
    helpers: set[str] = set()
    if layout_of(src) == FLAT_CL:
        shape = literal(tuple(src.extra["flat_of"]))
        kernel = KerasWeight("kernel", f"dense_kernel_from_channels_first({arr(ctx, 'weight')}, {shape})",
                             ((key(ctx, "weight"), f"dense_kernel_to_channels_first({{v}}, {shape})"),),
                             "dense_kernel_from_channels_first")
        helpers.update({"dense_kernel_from_channels_first", "dense_kernel_to_channels_first"})
        x = src.out
    else:
        kernel = weight(ctx, "kernel", "weight", "transpose", "transpose")
        helpers.add("transpose")
        x = take(ctx, 0, CANON, helpers)
    weights = [kernel] + ([weight(ctx, "bias", "bias")] if p["bias"] else [])
    return layer(ctx, call(module(ctx), x), ctor, layout=CANON, weights=weights, helpers=sorted(helpers))
