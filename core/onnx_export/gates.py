"""HardSigmoid is ONNX's own (alpha and beta as the node has them)."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


@exports("HardSigmoid")
def hard_sigmoid(ctx: ExportContext) -> str:
    return ctx.op("HardSigmoid", ctx.inputs, ctx.out, alpha=ctx.params["alpha"], beta=ctx.params["beta"])
