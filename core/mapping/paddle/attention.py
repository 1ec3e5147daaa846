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
    if p["causal"]:
        mask = call("causal_mask", literal(ctx.in_shapes[0][0]), f"{x}.dtype")
        return layer(ctx, call(module(ctx), x, x, x, mask), ctor, weights=tuple(attention_bindings(ctx)),
                     helpers=("causal_mask",))
    return layer(ctx, call(module(ctx), x, x, x), ctor, weights=tuple(attention_bindings(ctx)))


@register("TransformerEncoderLayer")
def transformer_encoder_layer(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    tanh = p["activation"] == "gelu_tanh"  # paddle's layer takes F.<name>: the tanh GELU is set after it is built
    kwargs: dict[str, Any] = {"dropout": p["dropout"], "activation": "gelu" if tanh else p["activation"]}
    if p["norm_first"]:
        kwargs["normalize_before"] = True
    if p["layer_norm_eps"] != 1e-5:
        kwargs["layer_norm_eps"] = p["layer_norm_eps"]
    ctor = call("nn.TransformerEncoderLayer", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]),
                literal(p["dim_feedforward"]), **kwargs)
    helpers: tuple[str, ...] = ()
    if tanh:
        ctor = f"with_activation({ctor}, gelu_tanh)"
        helpers = ("gelu_tanh",)
    weights = attention_bindings(ctx, "self_attn.")
    weights += linear_bindings(ctx, "linear1.") + linear_bindings(ctx, "linear2.")
    weights += [bind(ctx, f"{norm}.{name}") for norm in ("norm1", "norm2") for name in ("weight", "bias")]
    x = ctx.in_names[0]
    if p["causal"]:
        mask = call("causal_mask", literal(ctx.in_shapes[0][0]), f"{x}.dtype")
        return layer(ctx, call(module(ctx), x, mask), ctor, weights=tuple(weights), helpers=("causal_mask", *helpers))
    return layer(ctx, call(module(ctx), x), ctor, weights=tuple(weights), helpers=helpers)
