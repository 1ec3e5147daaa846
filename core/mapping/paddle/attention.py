"""Self-attention and transformer encoder blocks (paddle is batch-first). Paddle keeps
separate q/k/v projections where torch packs them into one ``in_proj``; the bindings split
torch's packed weight in three."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import attention_bindings, bind, layer, linear_bindings, module, register


@register("MultiheadAttention")
def multihead_attention(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {}
    if p["dropout"]:
        kwargs["dropout"] = p["dropout"]
    if not p["bias"]:
        kwargs["bias_attr"] = False
    ctor = call("nn.MultiHeadAttention", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]), **kwargs)
    x = ctx.in_names[0]
    # query, key and value are all the input (self-attention)
    return layer(ctx, call(module(ctx), x, x, x), ctor, weights=tuple(attention_bindings(ctx)))


@register("TransformerEncoderLayer")
def transformer_encoder_layer(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"dropout": p["dropout"], "activation": p["activation"]}
    if p["norm_first"]:
        kwargs["normalize_before"] = True
    if p["layer_norm_eps"] != 1e-5:
        kwargs["layer_norm_eps"] = p["layer_norm_eps"]
    ctor = call("nn.TransformerEncoderLayer", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]),
                literal(p["dim_feedforward"]), **kwargs)
    weights = attention_bindings(ctx, "self_attn.")
    weights += linear_bindings(ctx, "linear1.") + linear_bindings(ctx, "linear2.")
    weights += [bind(ctx, f"{norm}.{name}") for norm in ("norm1", "norm2") for name in ("weight", "bias")]
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor, weights=tuple(weights))
