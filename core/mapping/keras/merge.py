"""Residual sums and concatenation: inputs are brought to one layout (channels-last when
any input is), and Concat's axis moves with it."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, cropped
from core.mapping.keras._common import CL, common_layout, keras_axis, layer, register, take
from core.ops.merge import CropConcat


@register("Add")
def add(ctx: ConvertContext) -> MappedLayer:
    layout = common_layout(ctx)
    helpers: set[str] = set()
    terms = [take(ctx, i, layout, helpers) for i in range(len(ctx.inputs))]
    return layer(ctx, " + ".join(terms), layout=layout, helpers=sorted(helpers))


@register("Concat")
def concat(ctx: ConvertContext) -> MappedLayer:
    layout = common_layout(ctx)
    helpers: set[str] = set()
    tensors = "[" + ", ".join(take(ctx, i, layout, helpers) for i in range(len(ctx.inputs))) + "]"
    axis = keras_axis(ctx.params["axis"], len(ctx.in_shapes[0]), layout)
    return layer(ctx, call("ops.concatenate", tensors, axis=axis), layout=layout, helpers=sorted(helpers))


@register("CropConcat")
def crop_concat(ctx: ConvertContext) -> MappedLayer:
    layout = common_layout(ctx)
    helpers: set[str] = set()
    boxes = CropConcat.crops(ctx.in_shapes, ctx.out_shape)
    tensors = "[" + ", ".join(cropped(take(ctx, i, layout, helpers), b, channels_last=layout == CL)
                              for i, b in enumerate(boxes)) + "]"
    axis = keras_axis(0, len(ctx.in_shapes[0]), layout)
    return layer(ctx, call("ops.concatenate", tensors, axis=axis), layout=layout, helpers=sorted(helpers))
