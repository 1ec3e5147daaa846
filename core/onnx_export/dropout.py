"""Dropout: the identity in inference (an exported model is evaluated, never trained)."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


@exports("Dropout")
def dropout(ctx: ExportContext) -> str:
    return ctx.op("Identity", ctx.inputs, ctx.out)
