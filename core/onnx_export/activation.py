"""Element-wise activations and softmax that are not one ONNX operator each, in opset-17 operators
(GELU and SiLU written out: ONNX has Gelu only from opset 20). The ones that are (ReLU, Sigmoid,
LeakyReLU…) declare it on the op and share :mod:`core.onnx_export.one_to_one`."""

from __future__ import annotations

import math

from core.onnx_export._graph import ExportContext, batch_axis, exports


@exports("ReLU6")
def relu6(ctx: ExportContext) -> str:
    return ctx.op("Clip", [ctx.inputs[0], ctx.const("min", 0.0), ctx.const("max", 6.0)], ctx.out)


@exports("SiLU")
def silu(ctx: ExportContext) -> str:
    x = ctx.inputs[0]
    return ctx.op("Mul", [x, ctx.op("Sigmoid", [x])], ctx.out)


def gelu(ctx: ExportContext, x: str, approximate: str = "none", out: str | None = None) -> str:
    """x·Φ(x) = ½x(1 + erf(x/√2)); with ``approximate='tanh'``: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    if approximate == "none":
        inner = ctx.op("Erf", [ctx.op("Mul", [x, ctx.const("inv_sqrt2", 1.0 / math.sqrt(2.0))])])
    else:
        cube = ctx.op("Mul", [ctx.op("Mul", [x, x]), x])
        poly = ctx.op("Add", [x, ctx.op("Mul", [cube, ctx.const("c", 0.044715)])])
        inner = ctx.op("Tanh", [ctx.op("Mul", [poly, ctx.const("sqrt_2_over_pi", math.sqrt(2.0 / math.pi))])])
    half_x = ctx.op("Mul", [x, ctx.const("half", 0.5)])
    return ctx.op("Mul", [half_x, ctx.op("Add", [inner, ctx.const("one", 1.0)])], out)


@exports("GELU")
def gelu_node(ctx: ExportContext) -> str:
    return gelu(ctx, ctx.inputs[0], ctx.params["approximate"], ctx.out)


@exports("Softmax")
def softmax(ctx: ExportContext) -> str:
    return ctx.op("Softmax", ctx.inputs, ctx.out, axis=batch_axis(ctx.params["axis"]))
