"""Residual sums (left to right, as the generated programs add) and concatenation."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, batch_axis, exports


@exports("Add")
def add(ctx: ExportContext) -> str:
    total = ctx.inputs[0]
    for i, x in enumerate(ctx.inputs[1:], start=2):
        total = ctx.op("Add", [total, x], ctx.out if i == len(ctx.inputs) else None)
    return total


@exports("Concat")
def concat(ctx: ExportContext) -> str:
    return ctx.op("Concat", ctx.inputs, ctx.out, axis=batch_axis(ctx.params["axis"]))
