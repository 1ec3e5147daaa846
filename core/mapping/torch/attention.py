"""Self-attention and transformer encoder blocks, batch-first.

Both map to small modules of the generated model.py (``SelfAttention``, ``TransformerEncoderBlock``) that
keep torch's parameter names and shapes (``in_proj_weight``, ``in_proj_bias``, ``out_proj``; ``self_attn``,
``linear1``, ``linear2``, ``norm1``, ``norm2``) but run one packed projection and
``scaled_dot_product_attention`` on the batch-first tensor: the same output as ``nn.MultiheadAttention`` /
``nn.TransformerEncoderLayer`` at about two thirds of their CPU time (docs/performance.md).
"""

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
    if p["causal"]:
        kwargs["causal"] = True
    ctor = call("SelfAttention", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor, helpers=("SelfAttention",))


@register("TransformerEncoderLayer")
def transformer_encoder_layer(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"dim_feedforward": p["dim_feedforward"], "dropout": p["dropout"],
                              "activation": p["activation"]}
    if p["layer_norm_eps"] != 1e-5:
        kwargs["layer_norm_eps"] = p["layer_norm_eps"]
    if p["norm_first"]:
        kwargs["norm_first"] = True
    if p["causal"]:
        kwargs["causal"] = True
    ctor = call("TransformerEncoderBlock", literal(ctx.in_shapes[0][1]), literal(p["num_heads"]), **kwargs)
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor, helpers=("SelfAttention", "TransformerEncoderBlock"))
