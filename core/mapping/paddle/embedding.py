"""Token embeddings and learned positions."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import layer, module, register


@register("Embedding")
def embedding(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    ctor = call("nn.Embedding", literal(p["num_embeddings"]), literal(p["embedding_dim"]))
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor)


@register("PositionalEmbedding")
def positional(ctx: ConvertContext) -> MappedLayer:
    length, width = ctx.in_shapes[0]
    ctor = call("PositionalEmbedding", literal(length), literal(width))
    return layer(ctx, call(module(ctx), ctx.in_names[0]), ctor, helpers=("PositionalEmbedding",))
