"""Self-attention and transformer encoder blocks, batch-first."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


@register("MultiheadAttention")
def multihead_attention(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {}
    if p["dropout"]:
        kwargs["dropout"] = p["dropout"]
    if not p["bias"]:
        kwargs["bias"] = False
    kwargs["batch_first"] = True
    ctor = call("nn.MultiheadAttention", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]), **kwargs)
    x = ctx.in_names[0]
    return layer(ctx, f"{call(module(ctx), x, x, x, need_weights=False)}[0]", ctor)


@register("TransformerEncoderLayer")
def transformer_encoder_layer(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {
        "dim_feedforward": p["dim_feedforward"],
        "dropout": p["dropout"],
        "activation": p["activation"],
    }
    if p["layer_norm_eps"] != 1e-5:
        kwargs["layer_norm_eps"] = p["layer_norm_eps"]
    kwargs["batch_first"] = True
    if p["norm_first"]:
        kwargs["norm_first"] = True
    ctor = call("nn.TransformerEncoderLayer", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)
