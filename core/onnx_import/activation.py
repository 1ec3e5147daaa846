"""Activations that are not one catalogue op each (Clip, Softmax), Dropout and Identity. The ONNX
operators that are (Relu, LeakyRelu, HardSigmoid…) are declared on their ops and share
:mod:`core.onnx_import.one_to_one`."""

from __future__ import annotations

import math

import numpy as np

from core.onnx_import._graph import Imported, NodeContext, Refused, Value, imports


def _bound(ctx: NodeContext, attr: str, i: int) -> float | None:
    """Clip's min/max: an attribute before opset 11, an optional constant input since."""
    if ctx.opset < 11:
        value = ctx.attr(attr)
        return None if value is None else float(value)
    if i >= len(ctx.inputs) or ctx.inputs[i] is None:
        return None
    array = ctx.const(i)
    if array is None:
        raise Refused(f"its {attr} is computed by the network", expected=f"a constant {attr}")
    return float(array.reshape(-1)[0])


@imports("Clip")
def clip(ctx: NodeContext) -> Value:
    """Clip(0, 6) is ReLU6 (MobileNet), Clip(0, ∞) ReLU; other ranges have no catalogue op."""
    lo, hi = _bound(ctx, "min", 1), _bound(ctx, "max", 2)
    if lo == 0.0 and hi == 6.0:
        return ctx.add("ReLU6", {}, [ctx.value(0)])
    if lo == 0.0 and (hi is None or math.isinf(hi)):
        return ctx.add("ReLU", {}, [ctx.value(0)])
    raise Refused(f"clips to [{lo}, {hi}]", expected="[0, 6] (ReLU6) or [0, ∞) (ReLU)")


@imports("Softmax")
def softmax(ctx: NodeContext) -> Value:
    """Before opset 13 Softmax flattens from ``axis`` on: one softmax axis when the axes after it are 1."""
    x = ctx.value(0)
    rank = len(x.shape) + 1
    axis = int(ctx.attr("axis", 1 if ctx.opset < 13 else -1)) % rank
    if axis == 0:
        raise Refused("it normalises over the batch axis", expected="an axis of one sample")
    if ctx.opset < 13 and any(d != 1 for d in x.shape[axis:]):
        raise Refused(f"opset {ctx.opset} Softmax over the flattened axes {axis}… of {x.shape}",
                      expected="axis the last one, or the axes after it of size 1")
    return ctx.add("Softmax", {"axis": axis - 1}, [x])


@imports("Dropout")
def dropout(ctx: NodeContext) -> Value:
    """Kept as a Dropout (the identity at inference, regularisation when fine-tuning)."""
    if ctx.opset >= 12:
        ratio = ctx.const(1)
        p = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    else:
        p = float(ctx.attr("ratio", 0.5))
    return ctx.add("Dropout", {"p": round(p, 6)}, [ctx.value(0)])


@imports("Identity")
def identity(ctx: NodeContext) -> Imported:
    got = ctx.inputs[0]
    if got is None or isinstance(got, np.ndarray):
        raise Refused("its input is not computed by the network")
    return got
