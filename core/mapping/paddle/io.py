"""Input and Output: where tensors enter and leave ``forward``."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer
from core.mapping.paddle._common import layer, register


@register("Input")
def input_(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, "x", is_input=True)


@register("Output")
def output(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, ctx.in_names[0], is_output=True)
