"""Residual sums (left to right, as the generated programs add) and concatenation; CropConcat as a Slice
of each larger input on its spatial axes, then Concat along the channels."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, batch_axis, exports
from core.ops.merge import CropConcat


@exports("Add")
def add(ctx: ExportContext) -> str:
    total = ctx.inputs[0]
    for i, x in enumerate(ctx.inputs[1:], start=2):
        total = ctx.op("Add", [total, x], ctx.out if i == len(ctx.inputs) else None)
    return total


@exports("Concat")
def concat(ctx: ExportContext) -> str:
    return ctx.op("Concat", ctx.inputs, ctx.out, axis=batch_axis(ctx.params["axis"]))


@exports("CropConcat")
def crop_concat(ctx: ExportContext) -> str:
    terms = []
    for i, box in enumerate(CropConcat.crops(ctx.in_shapes, ctx.out_shape)):
        if box is None:
            terms.append(ctx.inputs[i])
            continue
        starts = ctx.const(f"starts{i}", [a for a, _ in box])
        ends = ctx.const(f"ends{i}", [b for _, b in box])
        axes = ctx.const(f"axes{i}", list(range(2, 2 + len(box))))
        terms.append(ctx.op("Slice", [ctx.inputs[i], starts, ends, axes]))
    return ctx.op("Concat", terms, ctx.out, axis=1)
