"""Activations that are not one catalogue op each (Clip, Softmax), Dropout and Identity. The ONNX
operators that are (Relu, LeakyRelu, HardSigmoid…) are declared on their ops and share
:mod:`core.onnx_import.one_to_one`."""

from __future__ import annotations

import math

import numpy as np

from core.onnx_import._graph import Imported, NodeContext, Refused, Value, imports
from core.onnx_import._patterns import Fused, PatternGraph


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


def match_gelu(g: PatternGraph, erf_index: int) -> Fused | None:
    """FlowTrain's exact GELU, ½x(1 + erf(x/√2)) written Mul(x, 1/√2) → Erf → Add 1, Mul(x, ½), Mul of the
    two (:func:`core.onnx_export.activation.gelu`): one GELU (a matcher of :mod:`core.onnx_import._patterns`)."""
    erf = g.nodes[erf_index]
    scaled = g.node(erf.input[0], "Mul")
    split = g.split(scaled[1]) if scaled is not None else None
    if split is None or split[1].size != 1 or not np.isclose(float(split[1].reshape(-1)[0]), 1 / math.sqrt(2)):
        return None
    x = split[0]
    used = [scaled[0], erf_index]  # type: ignore[index]
    steps: list[tuple[str, float]] = [("Add", 1.0)]
    tensor = erf.output[0]
    for op_type, value in steps:
        after = g.only_reader(tensor)
        split = g.split(g.nodes[after]) if after is not None and g.nodes[after].op_type == op_type else None
        if split is None or split[0] != tensor or split[1].size != 1 or float(split[1].reshape(-1)[0]) != value:
            return None
        used.append(after)  # type: ignore[arg-type]
        tensor = g.nodes[after].output[0]  # type: ignore[index]
    final = g.only_reader(tensor)
    if final is None or g.nodes[final].op_type != "Mul":
        return None
    other = [t for t in g.nodes[final].input if t != tensor]
    half = g.node(other[0], "Mul") if len(other) == 1 else None
    split = g.split(half[1]) if half is not None else None
    if split is None or split[0] != x or split[1].size != 1 or float(split[1].reshape(-1)[0]) != 0.5 \
            or g.readers[other[0]] != 1 or any(g.readers[t] != 1 for t in (erf.input[0], erf.output[0])):
        return None
    used += [half[0], final]  # type: ignore[index]
    return Fused("GELU", x, max(used), g.nodes[final].output[0], g.nodes[final].name.split("/")[0] or "gelu",
                 {"approximate": "none"}, {}, frozenset(used))


@imports("Gelu")
def gelu(ctx: NodeContext) -> Value:
    """ONNX's own Gelu (opset 20): exact, or the tanh approximation with ``approximate='tanh'``."""
    approximate = ctx.attr("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else str(approximate)
    if approximate not in ("none", "tanh"):
        raise Refused(f"approximate {approximate!r}", expected="'none' or 'tanh'")
    return ctx.add("GELU", {"approximate": approximate}, [ctx.value(0)])


def _scaled(g: PatternGraph, tensor: str, op_type: str, value: float) -> tuple[int, str] | None:
    """(the node, its computed operand) when ``tensor`` is op_type(computed, constant ≈ value)."""
    found = g.node(tensor, op_type)
    split = g.split(found[1]) if found is not None else None
    if split is None or split[1].size != 1 or not np.isclose(float(split[1].reshape(-1)[0]), value, rtol=1e-6):
        return None
    return found[0], split[0]  # type: ignore[index]


def _cube(g: PatternGraph, tensor: str, x: str) -> list[int] | None:
    """The nodes computing x³ as ``tensor``: Pow(x, 3), or x·x·x as two Muls in either order."""
    power = _scaled(g, tensor, "Pow", 3.0)
    if power is not None:
        return [power[0]] if power[1] == x else None
    outer = g.node(tensor, "Mul")
    if outer is None or len(outer[1].input) != 2 or x not in outer[1].input:
        return None
    rest = list(outer[1].input)
    rest.remove(x)
    square = g.node(rest[0], "Mul")
    if square is None or list(square[1].input) != [x, x] or g.readers[rest[0]] != 1:
        return None
    return [outer[0], square[0]]


def match_gelu_tanh(g: PatternGraph, tanh_index: int) -> Fused | None:
    """GELU's tanh approximation, ½x(1 + tanh(√(2/π)(x + 0.044715x³))), as FlowTrain's export writes it
    (:func:`core.onnx_export.activation.gelu`) and as torch.onnx does (operands of Mul and Add in either
    order, x³ as two Muls or a Pow): one GELU with ``approximate='tanh'``."""
    tanh = g.nodes[tanh_index]
    scaled = _scaled(g, tanh.input[0], "Mul", math.sqrt(2 / math.pi))
    poly = g.node(scaled[1], "Add") if scaled is not None else None
    if scaled is None or poly is None or len(poly[1].input) != 2:
        return None
    used = [tanh_index, scaled[0], poly[0]]
    for k in (0, 1):
        term = _scaled(g, poly[1].input[k], "Mul", 0.044715)
        x = poly[1].input[1 - k]
        cube = _cube(g, term[1], x) if term is not None else None
        if term is not None and cube is not None:
            used += [term[0], *cube]
            inner = [poly[1].input[k], term[1]]
            break
    else:
        return None
    plus = g.only_reader(tanh.output[0])
    split = g.split(g.nodes[plus]) if plus is not None and g.nodes[plus].op_type == "Add" else None
    if split is None or split[0] != tanh.output[0] or split[1].size != 1 or float(split[1].reshape(-1)[0]) != 1.0:
        return None
    used.append(plus)  # type: ignore[arg-type]
    final = g.only_reader(g.nodes[plus].output[0])  # type: ignore[index]
    if final is None or g.nodes[final].op_type != "Mul" or len(g.nodes[final].input) != 2:
        return None
    other = [t for t in g.nodes[final].input if t != g.nodes[plus].output[0]]  # type: ignore[index]
    half = _scaled(g, other[0], "Mul", 0.5) if len(other) == 1 else None
    end = final
    if half is not None and half[1] == x and g.readers[other[0]] == 1:  # (½·x)·(1 + tanh)
        used += [half[0], final]
    elif other == [x]:  # x·(1 + tanh), then ·½
        after = g.only_reader(g.nodes[final].output[0])
        split = g.split(g.nodes[after]) if after is not None and g.nodes[after].op_type == "Mul" else None
        if split is None or split[0] != g.nodes[final].output[0] or split[1].size != 1 \
                or float(split[1].reshape(-1)[0]) != 0.5:
            return None
        used += [final, after]  # type: ignore[list-item]
        end = after  # type: ignore[assignment]
    else:
        return None
    inside = [tanh.input[0], scaled[1], *inner, tanh.output[0], g.nodes[plus].output[0]]  # type: ignore[index]
    if any(g.readers[t] != 1 for t in inside):
        return None
    return Fused("GELU", x, max(used), g.nodes[end].output[0], g.nodes[end].name.split("/")[0] or "gelu",
                 {"approximate": "tanh"}, {}, frozenset(used))
