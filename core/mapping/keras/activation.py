"""Element-wise activations (stateless ``keras.ops`` calls in ``call``) and softmax.

Element-wise ops keep whatever layout their input has. GELU is written with
``approximate=False`` because ``keras.ops.gelu`` defaults to the tanh approximation
while torch's default is exact.
"""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.keras._common import FLAT_CL, keras_axis, layer, layout_of, register

_PLAIN = {"ReLU": "ops.relu", "ReLU6": "ops.relu6", "SiLU": "ops.silu", "Sigmoid": "ops.sigmoid",
          "Tanh": "ops.tanh", "Hardswish": "ops.hard_swish", "Softplus": "ops.softplus"}


def _same_layout(ctx: ConvertContext, forward: str) -> MappedLayer:
    src = ctx.inputs[0]
    return layer(ctx, forward, layout=layout_of(src), flat_of=src.extra.get("flat_of"))


@register(*_PLAIN)
def plain(ctx: ConvertContext) -> MappedLayer:
    return _same_layout(ctx, call(_PLAIN[ctx.node.op], ctx.in_names[0]))


@register("LeakyReLU")
def leaky_relu(ctx: ConvertContext) -> MappedLayer:
    return _same_layout(ctx, call("ops.leaky_relu", ctx.in_names[0], negative_slope=ctx.params["negative_slope"]))


@register("ELU")
def elu(ctx: ConvertContext) -> MappedLayer:
    return _same_layout(ctx, call("ops.elu", ctx.in_names[0], alpha=ctx.params["alpha"]))


@register("GELU")
def gelu(ctx: ConvertContext) -> MappedLayer:
    return _same_layout(ctx, call("ops.gelu", ctx.in_names[0], approximate=ctx.params["approximate"] == "tanh"))


@register("Softmax")
def softmax(ctx: ConvertContext) -> MappedLayer:
    """The axis follows the layout; over a flattened vector the order does not matter."""
    src = ctx.inputs[0]
    rank = len(ctx.in_shapes[0])
    layout = layout_of(src)
    axis = -1 if layout == FLAT_CL else keras_axis(ctx.params["axis"], rank, layout)
    return _same_layout(ctx, call("ops.softmax", ctx.in_names[0], axis=axis))
