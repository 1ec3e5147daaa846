"""Element-wise arithmetic: sums of computed tensors (Add, n-ary Sum) are the catalogue's Add; Add, Sub,
Mul and Div by a per-channel constant are folded into a BatchNorm (:func:`core.onnx_import.norm.affine`)."""

from __future__ import annotations

import numpy as np

from core.onnx_import._graph import NodeContext, Refused, Value, imports
from core.onnx_import.norm import affine, per_channel


def _by_constant(ctx: NodeContext) -> tuple[Value, np.ndarray, bool]:
    """(the computed input, the per-channel constant, whether the constant is the first operand)."""
    first, second = ctx.const(0), ctx.const(1)
    if (first is None) == (second is None):
        raise Refused("needs one computed and one constant operand", expected="x op constant")
    x = ctx.value(1 if first is not None else 0)
    c = per_channel(first if first is not None else second, x)  # type: ignore[arg-type]
    if c is None:
        raise Refused(f"its constant does not broadcast as one number per channel of {x.shape}",
                      expected="a scalar or per-channel constant (shape (C, 1, 1))")
    return x, c, first is not None


@imports("Add", "Sum")
def add(ctx: NodeContext) -> Value:
    if ctx.node.op_type == "Add" and (ctx.const(0) is not None or ctx.const(1) is not None):
        x, c, _ = _by_constant(ctx)
        return affine(ctx, x, None, c, ctx.single_consumer[0 if ctx.const(1) is not None else 1])
    terms = [ctx.value(i) for i in range(len(ctx.inputs))]
    if len(terms) == 1:
        return terms[0]
    return ctx.add("Add", {}, terms)


@imports("Sub")
def sub(ctx: NodeContext) -> Value:
    x, c, const_first = _by_constant(ctx)
    reader = ctx.single_consumer[1 if const_first else 0]
    if const_first:  # c − x
        return affine(ctx, x, np.full_like(c, -1.0), c, reader)
    return affine(ctx, x, None, -c, reader)


@imports("Mul")
def mul(ctx: NodeContext) -> Value:
    x, c, const_first = _by_constant(ctx)
    return affine(ctx, x, c, None, ctx.single_consumer[1 if const_first else 0])


@imports("Div")
def div(ctx: NodeContext) -> Value:
    x, c, const_first = _by_constant(ctx)
    if const_first or not np.all(c != 0):
        raise Refused("divides by a computed tensor or by zero", expected="x / non-zero constant")
    return affine(ctx, x, (1.0 / c).astype(np.float32), None, ctx.single_consumer[0])


@imports("Concat")
def concat(ctx: NodeContext) -> Value:
    terms = [ctx.value(i) for i in range(len(ctx.inputs))]
    rank = len(terms[0].shape) + 1
    axis = int(ctx.attr("axis")) % rank
    if axis == 0:
        raise Refused("it joins along the batch axis", expected="an axis of one sample")
    if len(terms) == 1:
        return terms[0]
    return ctx.add("Concat", {"axis": axis - 1}, terms)
