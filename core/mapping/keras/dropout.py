"""Dropout: a Keras layer, active only when ``call`` runs with ``training=True``."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import layer, layout_of, module, register


@register("Dropout")
def dropout(ctx: ConvertContext) -> MappedLayer:
    src = ctx.inputs[0]
    return layer(ctx, call(module(ctx), ctx.in_names[0], "training=training"),
                 call("layers.Dropout", literal(ctx.params["p"])), layout=layout_of(src),
                 flat_of=src.extra.get("flat_of"), training=True)
