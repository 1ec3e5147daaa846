"""Self-attention and transformer encoder blocks written out in MatMul, Softmax and
LayerNormalization (ONNX has no attention operator in the default domain before opset 23):
q, k and v from torch's packed ``in_proj`` (split into three transposed matrices), heads split
as (N, heads, T, d), softmax(q·kᵀ/√d)·v, heads joined, ``out_proj``. The encoder block follows
torch's: post-norm ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``, or pre-norm
``x = x + sa(norm1(x)); x = x + ff(norm2(x))``; dropout is the identity."""

from __future__ import annotations

import math

import numpy as np

from core.onnx_export._graph import ExportContext, exports
from core.onnx_export.activation import gelu
from core.onnx_export.dense import linear
from core.onnx_export.norm import layer_norm


def self_attention(ctx: ExportContext, x: str, width: int, heads: int, prefix: str = "",
                   out: str | None = None) -> str:
    """The attention block; a ``causal`` node adds −∞ above the diagonal of the scores (masked attention)."""
    d = width // heads
    packed, packed_bias = ctx.weights[f"{prefix}in_proj_weight"], ctx.weights.get(f"{prefix}in_proj_bias")
    projected = []
    for i, part in enumerate("qkv"):
        rows = slice(i * width, (i + 1) * width)
        y = ctx.op("MatMul", [x, ctx.const(f"{prefix}{part}_proj.T", packed[rows].T)])
        if packed_bias is not None:
            y = ctx.op("Add", [y, ctx.const(f"{prefix}{part}_proj.bias", packed_bias[rows])])
        perm = [0, 2, 3, 1] if part == "k" else [0, 2, 1, 3]  # k as (N, heads, d, T), q and v (N, heads, T, d)
        projected.append(ctx.op("Transpose", [ctx.reshape(y, [0, 0, heads, d])], perm=perm))
    q, k, v = projected
    scores = ctx.op("Mul", [ctx.op("MatMul", [q, k]), ctx.const(f"{prefix}scale", 1.0 / math.sqrt(d))])
    if ctx.params["causal"]:
        steps = ctx.in_shapes[0][0]
        mask = np.triu(np.full((steps, steps), -np.inf, dtype=np.float32), 1)
        scores = ctx.op("Add", [scores, ctx.const(f"{prefix}causal_mask", mask)])
    weighted = ctx.op("MatMul", [ctx.op("Softmax", [scores], axis=-1), v])  # (N, heads, T, d)
    joined = ctx.reshape(ctx.op("Transpose", [weighted], perm=[0, 2, 1, 3]), [0, 0, width])
    return linear(ctx, joined, 2, f"{prefix}out_proj.", out)


@exports("MultiheadAttention")
def multihead_attention(ctx: ExportContext) -> str:
    return self_attention(ctx, ctx.inputs[0], ctx.in_shapes[0][1], ctx.params["num_heads"], out=ctx.out)


@exports("TransformerEncoderLayer")
def transformer_encoder_layer(ctx: ExportContext) -> str:
    p, x = ctx.params, ctx.inputs[0]
    width, eps = ctx.in_shapes[0][1], p["layer_norm_eps"]

    def attend(y: str) -> str:
        return self_attention(ctx, y, width, p["num_heads"], "self_attn.")

    def feed_forward(y: str) -> str:
        hidden = linear(ctx, y, 2, "linear1.")
        hidden = ctx.op("Relu", [hidden]) if p["activation"] == "relu" else \
            gelu(ctx, hidden, "tanh" if p["activation"] == "gelu_tanh" else "none")
        return linear(ctx, hidden, 2, "linear2.")

    if p["norm_first"]:
        x = ctx.op("Add", [x, attend(layer_norm(ctx, x, width, eps, "norm1."))])
        return ctx.op("Add", [x, feed_forward(layer_norm(ctx, x, width, eps, "norm2."))], ctx.out)
    x = layer_norm(ctx, ctx.op("Add", [x, attend(x)]), width, eps, "norm1.")
    return layer_norm(ctx, ctx.op("Add", [x, feed_forward(x)]), width, eps, "norm2.", ctx.out)
