"""ChannelShuffle as ShuffleNet's own ONNX form: Reshape to (N, groups, C/groups, …), swap, Reshape back."""

from __future__ import annotations

from core.onnx_export._graph import ExportContext, exports


@exports("ChannelShuffle")
def channel_shuffle(ctx: ExportContext) -> str:
    shape = ctx.in_shapes[0]
    g = ctx.params["groups"]
    rest = list(shape[1:])
    split = ctx.reshape(ctx.inputs[0], [0, g, shape[0] // g, *rest])
    perm = [0, 2, 1, *range(3, 3 + len(rest))]
    swapped = ctx.op("Transpose", [split], perm=perm)
    return ctx.reshape(swapped, [0, *shape], ctx.out)
