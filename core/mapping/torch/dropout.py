"""Dropout: a module, so that ``model.eval()`` turns it off."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.torch._common import layer, module, register


@register("Dropout")
def dropout(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call(module(ctx), ctx.in_names[0]), call("nn.Dropout", p=ctx.params["p"]))
