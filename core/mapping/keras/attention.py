"""Self-attention and transformer encoder blocks, batch-first (T, E).

Both are small layers defined in the generated ``model.py`` (``SelfAttention``,
``TransformerEncoderBlock``) that keep torch's parameter layout: one packed input
projection (a Dense with kernel (E, 3E) = ``in_proj_weight``ᵀ) and an output projection,
all U(±1/√E) as the ops declare (the helpers hard-code it: they take no initialiser). Keras's
own MultiHeadAttention splits the projections per head and has no encoder block.
"""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CANON, KerasWeight, layer, module, register, take, weight


def _attention_weights(ctx: ConvertContext, path: str, prefix: str, bias: bool) -> list[KerasWeight]:
    ws = [weight(ctx, f"{path}in_proj.kernel", f"{prefix}in_proj_weight", "transpose", "transpose"),
          weight(ctx, f"{path}out_proj.kernel", f"{prefix}out_proj.weight", "transpose", "transpose")]
    if bias:
        ws += [weight(ctx, f"{path}in_proj.bias", f"{prefix}in_proj_bias"),
               weight(ctx, f"{path}out_proj.bias", f"{prefix}out_proj.bias")]
    return ws


@register("MultiheadAttention")
def multihead_attention(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {}
    if p["dropout"]:
        kwargs["dropout"] = p["dropout"]
    if not p["bias"]:
        kwargs["use_bias"] = False
    if p["causal"]:
        kwargs["causal"] = True
    ctor = call("SelfAttention", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]), **kwargs)
    return layer(ctx, call(module(ctx), take(ctx, 0, CANON), "training=training"), ctor, layout=CANON,
                 weights=_attention_weights(ctx, "", "", p["bias"]),
                 helpers=["SelfAttention", "transpose"], training=True)


@register("TransformerEncoderLayer")
def transformer_encoder_layer(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    e = ctx.in_shapes[0][1]
    kwargs: dict[str, Any] = {"dim_feedforward": p["dim_feedforward"], "dropout": p["dropout"],
                              "activation": p["activation"]}
    if p["norm_first"]:
        kwargs["norm_first"] = True
    if p["layer_norm_eps"] != 1e-5:
        kwargs["layer_norm_eps"] = p["layer_norm_eps"]
    if p["causal"]:
        kwargs["causal"] = True
    ctor = call("TransformerEncoderBlock", literal(e), literal(p["num_heads"]), **kwargs)
    weights = _attention_weights(ctx, "self_attn.", "self_attn.", True)
    weights += [weight(ctx, f"{n}.kernel", f"{n}.weight", "transpose", "transpose") for n in ("linear1", "linear2")]
    weights += [weight(ctx, f"{n}.bias", f"{n}.bias") for n in ("linear1", "linear2")]
    weights += [weight(ctx, f"{n}.{kw}", f"{n}.{tw}") for n in ("norm1", "norm2")
                for kw, tw in (("gamma", "weight"), ("beta", "bias"))]
    return layer(ctx, call(module(ctx), take(ctx, 0, CANON), "training=training"), ctor, layout=CANON,
                 weights=weights, helpers=["SelfAttention", "TransformerEncoderBlock", "transpose"], training=True)
