"""Images as token sequences: a patch embedding is Conv (kernel = stride = the patch), Reshape to
(N, E, T) and Transpose to (N, T, E); a class token is an initialiser (1, 1, E) expanded to the batch
(Shape → Concat → Expand) and joined in front by Concat."""

from __future__ import annotations

import numpy as np

from core.onnx_export._graph import ExportContext, exports


@exports("PatchEmbed")
def patch_embed(ctx: ExportContext) -> str:
    p = ctx.params
    tokens, width = ctx.out_shape
    inputs = [ctx.inputs[0], ctx.weight("weight")] + ([ctx.weight("bias")] if p["bias"] else [])
    conv = ctx.op("Conv", inputs, kernel_shape=list(p["patch_size"]), strides=list(p["patch_size"]))
    flat = ctx.reshape(conv, [0, width, tokens])
    return ctx.op("Transpose", [flat], ctx.out, perm=[0, 2, 1])


@exports("ClassToken")
def class_token(ctx: ExportContext) -> str:
    width = ctx.in_shapes[0][1]
    token = ctx.const("token", np.asarray(ctx.weights["token"], dtype=np.float32).reshape(1, 1, width))
    batch = ctx.op("Shape", [ctx.inputs[0]], start=0, end=1)
    shape = ctx.op("Concat", [batch, ctx.const("shape", [1, width])], axis=0)
    tokens = ctx.op("Expand", [token, shape])
    return ctx.op("Concat", [tokens, ctx.inputs[0]], ctx.out, axis=1)
