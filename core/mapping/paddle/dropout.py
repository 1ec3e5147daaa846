"""Dropout: a layer, so that ``model.eval()`` turns it off (paddle's default mode
``upscale_in_train`` scales by 1/(1-p) while training, as torch does)."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.paddle._common import layer, module, register


@register("Dropout")
def dropout(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call(module(ctx), ctx.in_names[0]), call("nn.Dropout", p=ctx.params["p"]))
