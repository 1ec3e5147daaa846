"""Input and Output: where tensors enter and leave ``call``.

The model takes its input in the Keras layout (images channels-last, converted once when
the data is loaded, not at every step) and returns its output in the logical
(channels-first) layout, so losses and ``forward_numpy`` see the same shapes as torch.
"""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer
from core.mapping.keras._common import CANON, CL, layer, register, take
from core.ops import REGISTRY as OPS


def input_layout(ctx: ConvertContext) -> str:
    """Images are fed channels-last; a float (C, L) input too when every op reading it reads
    channels (``Op.reads_channels``: those run channels-last in Keras)."""
    shape = ctx.node.output.shape
    if len(shape) == 3:
        return CL
    if len(shape) == 2 and ctx.node.output.dtype == "float32":
        readers = [n.op for n in ctx.analysis.nodes.values() if ctx.node.id in n.inputs]
        if readers and all(OPS.get(op).reads_channels for op in readers):
            return CL
    return CANON


@register("Input")
def input_(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, ctx.out, layout=input_layout(ctx), is_input=True)


@register("Output")
def output(ctx: ConvertContext) -> MappedLayer:
    helpers: set[str] = set()
    return layer(ctx, take(ctx, 0, CANON, helpers), layout=CANON, helpers=sorted(helpers), is_output=True)
