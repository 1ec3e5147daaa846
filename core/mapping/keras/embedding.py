"""Token embeddings (N(0, 1) as torch) and learned positions (N(0, 0.02))."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import CANON, construct, initializer, layer, module, register, take, weight


@register("Embedding")
def embedding(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    ctor = construct("layers.Embedding", [literal(p["num_embeddings"]), literal(p["embedding_dim"])], {},
                     {"embeddings_initializer": initializer(ctx, "weight")})
    return layer(ctx, call(module(ctx), take(ctx, 0, CANON)), ctor, layout=CANON,
                 weights=[weight(ctx, "embeddings", "weight")])


@register("PositionalEmbedding")
def positional(ctx: ConvertContext) -> MappedLayer:
    length, width = ctx.in_shapes[0]
    helpers: set[str] = {"PositionalEmbedding"}
    x = take(ctx, 0, CANON, helpers)
    ctor = call("PositionalEmbedding", literal(length), literal(width))
    return layer(ctx, call(module(ctx), x), ctor, layout=CANON, weights=[weight(ctx, "table", "weight")],
                 helpers=sorted(helpers))
