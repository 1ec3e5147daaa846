"""Flatten and Reshape (the batch axis is kept)."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


@exports("Flatten")
def flatten(ctx: ExportContext) -> str:
    return ctx.op("Flatten", ctx.inputs, ctx.out, axis=1)


@exports("Reshape")
def reshape(ctx: ExportContext) -> str:
    return ctx.reshape(ctx.inputs[0], [-1, *ctx.out_shape], ctx.out)  # the shape with its -1 resolved
