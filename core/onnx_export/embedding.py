"""Token embeddings (a Gather of the table's rows) and learned positions (an Add)."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


@exports("Embedding")
def embedding(ctx: ExportContext) -> str:
    return ctx.op("Gather", [ctx.weight("weight"), ctx.inputs[0]], ctx.out, axis=0)


@exports("PositionalEmbedding")
def positional(ctx: ExportContext) -> str:
    return ctx.op("Add", [ctx.inputs[0], ctx.weight("weight")], ctx.out)  # (T, F) broadcasts over the batch
