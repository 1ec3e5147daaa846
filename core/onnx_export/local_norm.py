"""LocalResponseNorm is ONNX's LRN (the same window for the odd sizes the catalogue allows). onnxruntime
runs LRN on 4-d tensors only, so a signal (N, C, L) goes through (N, C, L, 1)."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


@exports("LocalResponseNorm")
def local_response_norm(ctx: ExportContext) -> str:
    p = ctx.params
    attrs = {"size": p["size"], "alpha": p["alpha"], "beta": p["beta"], "bias": p["k"]}
    shape = ctx.in_shapes[0]
    if len(shape) == 3:
        return ctx.op("LRN", ctx.inputs, ctx.out, **attrs)
    image = ctx.reshape(ctx.inputs[0], [0, *shape, 1])
    return ctx.reshape(ctx.op("LRN", [image], **attrs), [0, *shape], ctx.out)
