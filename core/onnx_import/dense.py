"""Gemm and MatMul by a constant matrix: a Linear (weight (out, in), as torch keeps it).

A matrix that is, value for value, the table of an Embedding upstream is a head tied to it (``tie_to``):
FlowTrain's export writes a tied head as the table's initialiser through a Transpose (folded here into a
constant), torch.onnx's constant folding as a transposed copy; either way the import holds the table once."""

from __future__ import annotations

import numpy as np

from core.onnx_import._graph import NodeContext, Refused, Value, imports


@imports("Gemm")
def gemm(ctx: NodeContext) -> Value:
    """Y = alpha·A·B' + beta·C with B' = Bᵀ when ``transB`` (the usual export): weight = alpha·B' ᵀ."""
    x = ctx.value(0)
    if ctx.attr("transA", 0):
        raise Refused("its input is transposed (transA=1)", expected="transA=0")
    b = ctx.weight(1, "weight matrix")
    weight = b if ctx.attr("transB", 0) else b.T
    weight = weight * np.float32(ctx.attr("alpha", 1.0))
    if len(x.shape) != 1 or x.shape[0] != weight.shape[1]:
        raise Refused(f"its input {x.shape} does not fit the ({weight.shape[1]}, {weight.shape[0]}) matrix",
                      expected=f"features ({weight.shape[1]},)", fix="a Flatten before it may be missing")
    weights = {"weight": weight}
    if len(ctx.inputs) > 2 and ctx.inputs[2] is not None:
        c = ctx.weight(2, "bias") * np.float32(ctx.attr("beta", 1.0))
        try:
            weights["bias"] = np.broadcast_to(c.reshape(-1) if c.size == weight.shape[0] else c,
                                              (weight.shape[0],)).copy()
        except ValueError:
            raise Refused(f"its bias {c.shape} does not broadcast to ({weight.shape[0]},)") from None
    return _linear(ctx, x, weights)


@imports("MatMul")
def matmul(ctx: NodeContext) -> Value:
    x = ctx.value(0)
    w = ctx.weight(1, "weight matrix")
    if w.ndim != 2 or len(x.shape) not in (1, 2) or x.shape[-1] != w.shape[0]:
        raise Refused(f"multiplies {x.shape} by {w.shape}", expected="features (F,) or (T, F) by a constant (F, out)")
    return _linear(ctx, x, {"weight": w.T})


def _linear(ctx: NodeContext, x: Value, weights: dict[str, np.ndarray]) -> Value:
    """A Linear, tied to the Embedding upstream whose table its weight is (the table then held once)."""
    params: dict[str, object] = {"out_features": int(weights["weight"].shape[0]), "bias": "bias" in weights}
    table = _tied_table(ctx, x, weights["weight"])
    if table is not None:
        params["tie_to"] = table
        weights = {k: v for k, v in weights.items() if k != "weight"}
    return ctx.add("Linear", params, [x], weights)


def _tied_table(ctx: NodeContext, x: Value, weight: np.ndarray) -> str | None:
    """The Embedding upstream of ``x`` whose table equals ``weight`` exactly, or None."""
    b = ctx.builder
    seen, stack = {x.node}, [x.node]
    while stack:
        node = stack.pop()
        if b.ops.get(node) == "Embedding":
            table = b.weights.get(f"{node}/weight")
            if table is not None and table.shape == weight.shape and np.array_equal(table, weight):
                return node
        for v in b.inputs.get(node, ()):
            if v.node not in seen:
                seen.add(v.node)
                stack.append(v.node)
    return None
