"""Images as token sequences: a patch embedding (a convolution with kernel = stride = the patch,
flattened to (N, T, E)) and a learned class token prepended to the sequence (the helper ClassToken)."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


@register("PatchEmbed")
def patch_embed(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"kernel_size": p["patch_size"], "stride": p["patch_size"]}
    if not p["bias"]:
        kwargs["bias"] = False
    ctor = call("nn.Conv2d", literal(ctx.in_shapes[0][0]), literal(p["embed_dim"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]) + ".flatten(2).transpose(1, 2)", ctor)


@register("ClassToken")
def class_token(ctx: ConvertContext) -> MappedLayer:
    ctor = call("ClassToken", literal(ctx.in_shapes[0][1]))
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor, helpers=("ClassToken",))
