"""Fully-connected layers: Gemm for vectors (torch's (out, in) weight is Gemm's B with transB), a
MatMul with the transposed weight for sequences (N, T, F)."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


def linear(ctx: ExportContext, x: str, rank: int, prefix: str = "", out: str | None = None) -> str:
    """``x·Wᵀ + b`` with the canonical ``<prefix>weight`` and (if present) ``<prefix>bias``;
    ``rank`` is the per-sample rank of ``x`` (1: Gemm; more: MatMul over the last axis)."""
    weight, bias = f"{prefix}weight", f"{prefix}bias"
    has_bias = bias in ctx.weights
    if rank == 1:
        args = [x, ctx.weight(weight)] + ([ctx.weight(bias)] if has_bias else [])
        return ctx.op("Gemm", args, out, transB=1)
    product = ctx.op("MatMul", [x, ctx.const(f"{weight}.T", ctx.weights[weight].T)], None if has_bias else out)
    return ctx.op("Add", [product, ctx.weight(bias)], out) if has_bias else product


@exports("Linear")
def linear_node(ctx: ExportContext) -> str:
    tie = ctx.params.get("tie_to")
    if tie is not None:
        return tied_linear(ctx, ctx.parts.weights[f"{tie}/weight"])
    return linear(ctx, ctx.inputs[0], len(ctx.in_shapes[0]), out=ctx.out)


def tied_linear(ctx: ExportContext, table: str) -> str:
    """A head tied to an Embedding: the Embedding's one (V, E) initialiser, transposed by a Transpose node
    (Gemm's transB for vectors), so the model holds the table once as torch does."""
    x, has_bias = ctx.inputs[0], "bias" in ctx.weights
    if len(ctx.in_shapes[0]) == 1:
        return ctx.op("Gemm", [x, table] + ([ctx.weight("bias")] if has_bias else []), ctx.out, transB=1)
    product = ctx.op("MatMul", [x, ctx.op("Transpose", [table], perm=[1, 0])], None if has_bias else ctx.out)
    return ctx.op("Add", [product, ctx.weight("bias")], ctx.out) if has_bias else product
