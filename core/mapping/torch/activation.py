"""Element-wise activations (functional: they hold no state) and softmax."""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call
from core.mapping.torch._common import layer, register, torch_dim

_PLAIN = {"ReLU": "F.relu", "ReLU6": "F.relu6", "SiLU": "F.silu", "Sigmoid": "torch.sigmoid", "Tanh": "torch.tanh",
          "Hardswish": "F.hardswish", "Softplus": "F.softplus"}


@register(*_PLAIN)
def plain(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call(_PLAIN[ctx.node.op], ctx.in_names[0]))


@register("LeakyReLU")
def leaky_relu(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call("F.leaky_relu", ctx.in_names[0], negative_slope=ctx.params["negative_slope"]))


@register("ELU")
def elu(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call("F.elu", ctx.in_names[0], alpha=ctx.params["alpha"]))


@register("GELU")
def gelu(ctx: ConvertContext) -> MappedLayer:
    if ctx.params["approximate"] == "none":
        return layer(ctx, call("F.gelu", ctx.in_names[0]))
    return layer(ctx, call("F.gelu", ctx.in_names[0], approximate=ctx.params["approximate"]))


@register("Softmax")
def softmax(ctx: ConvertContext) -> MappedLayer:
    return layer(ctx, call("F.softmax", ctx.in_names[0], dim=torch_dim(ctx.params["axis"])))
