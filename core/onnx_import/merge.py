"""Element-wise arithmetic: sums of computed tensors (Add, n-ary Sum) are the catalogue's Add; Add, Sub,
Mul and Div by a per-channel constant are folded into a BatchNorm (:func:`core.onnx_import.norm.affine`).
Joins: Concat, and a Slice of feature maps around their centre joined along the channels is CropConcat."""

from __future__ import annotations

import numpy as np

from core.onnx_import._graph import Cropped, NodeContext, Refused, Value, imports
from core.onnx_import.norm import affine, per_channel
from core.ops.merge import centre_crop


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
        positions = _positions(ctx)
        if positions is not None:
            return positions
        biased = _linear_bias(ctx)
        if biased is not None:
            return biased
        x, c, _ = _by_constant(ctx)
        return affine(ctx, x, None, c, ctx.single_consumer[0 if ctx.const(1) is not None else 1])
    terms = [ctx.value(i) for i in range(len(ctx.inputs))]
    if len(terms) == 1:
        return terms[0]
    return ctx.add("Add", {}, terms)


def _positions(ctx: NodeContext) -> Value | None:
    """A sequence (T, E) plus a constant table of its own shape that is not one number per channel:
    a learned PositionalEmbedding (ViT's and BERT's position table), else None."""
    first, second = ctx.const(0), ctx.const(1)
    if (first is None) == (second is None):
        return None
    x = ctx.inputs[1 if first is not None else 0]
    table = first if first is not None else second
    if not isinstance(x, Value) or len(x.shape) != 2 or table is None or table.size != x.shape[0] * x.shape[1] \
            or table.shape[-2:] != x.shape or per_channel(table, x) is not None:
        return None
    return ctx.add("PositionalEmbedding", {}, [x], {"weight": table.reshape(x.shape).astype(np.float32)})


def _linear_bias(ctx: NodeContext) -> Value | None:
    """A constant (out,) added to a sequence (T, out) that a Linear without bias yields and only this Add
    reads: the Linear's bias (a Linear on sequences is exported MatMul + Add), else None."""
    i = 0 if ctx.const(1) is not None else 1
    x, c = ctx.inputs[i], ctx.const(1 - i)
    b = ctx.builder
    if not isinstance(x, Value) or c is None or len(x.shape) != 2 or not ctx.single_consumer[i] \
            or b.ops.get(x.node) != "Linear" or b.params[x.node]["bias"] or c.size != x.shape[1] \
            or any(d != 1 for d in c.shape[:-1]):
        return None
    inputs, weights = b.remove(x.node)
    weights["bias"] = c.reshape(-1).astype(np.float32)
    return b.add("Linear", {"out_features": x.shape[1], "bias": True}, inputs, x.node, weights)


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
    token = ctx.const(0)
    if token is not None and len(ctx.inputs) == 2:
        return _class_token(ctx, token)
    if any(isinstance(x, Cropped) for x in ctx.inputs):
        return _crop_concat(ctx)
    terms = [ctx.value(i) for i in range(len(ctx.inputs))]
    rank = len(terms[0].shape) + 1
    axis = int(ctx.attr("axis")) % rank
    if axis == 0:
        raise Refused("it joins along the batch axis", expected="an axis of one sample")
    if len(terms) == 1:
        return terms[0]
    return ctx.add("Concat", {"axis": axis - 1}, terms)


def _class_token(ctx: NodeContext, token: np.ndarray) -> Value:
    """A constant (1, 1, E) joined in front of a sequence (T, E) along time: ViT's class token (its
    export expands it to the batch, which folds to the constant at the import's batch of 1)."""
    x = ctx.value(1)
    axis = int(ctx.attr("axis")) % (len(x.shape) + 1)
    if token.ndim == 3 and len(token) > 1 and np.all(token == token[:1]):  # expanded to a fixed batch
        token = token[:1]
    if len(x.shape) != 2 or axis != 1 or token.shape != (1, 1, x.shape[1]):
        raise Refused(f"it joins a constant {token.shape} to {x.shape} along axis {axis}",
                      expected="a class token (1, 1, E) in front of a sequence (T, E) along axis 1")
    return ctx.add("ClassToken", {}, [x], {"token": token.reshape(1, -1).astype(np.float32)})


@imports("Slice")
def slice_(ctx: NodeContext) -> Cropped:
    """A feature map sliced by constants on its spatial axes (step 1), pending: only a Concat along the
    channels may read it (:func:`_crop_concat`)."""
    x = ctx.value(0)
    rank = len(x.shape) + 1
    starts, ends = ctx.const(1), ctx.const(2)
    given_axes = len(ctx.inputs) > 3 and ctx.inputs[3] is not None
    axes = ctx.const(3) if given_axes else None if starts is None else np.arange(starts.size)
    steps = ctx.const(4) if len(ctx.inputs) > 4 and ctx.inputs[4] is not None else None
    if starts is None or ends is None or axes is None or (len(ctx.inputs) > 4 and ctx.inputs[4] is not None
                                                          and steps is None):
        raise Refused("its starts, ends, axes or steps are computed", expected="constant starts, ends and axes")
    box = [(0, size) for size in x.shape[1:]]
    for start, end, axis, step in zip(starts.reshape(-1), ends.reshape(-1), axes.reshape(-1),
                                      (steps if steps is not None else np.ones(len(starts))).reshape(-1)):
        axis = int(axis) % rank
        if axis < 2 or int(step) != 1:
            raise Refused(f"it slices axis {axis} with step {int(step)}",
                          expected="a crop of the spatial axes (2 and after) with step 1, read by a Concat")
        size = x.shape[axis - 1]
        lo, hi = (max(min(int(v) + size if v < 0 else int(v), size), 0) for v in (start, end))
        box[axis - 2] = (lo, max(hi, lo))
    return Cropped(x, tuple(box))


def _crop_concat(ctx: NodeContext) -> Value:
    """Feature maps, some cropped by Slices, joined along the channels: CropConcat when every crop is the
    centre of its map at the smallest map's size (as the op crops)."""
    first = ctx.inputs[0]
    rank = len(first.source.shape if isinstance(first, Cropped) else ctx.value(0).shape) + 1
    if int(ctx.attr("axis")) % rank != 1:
        raise Refused("it joins cropped maps along another axis than the channels",
                      expected="a Concat along axis 1 of maps cropped on their spatial axes")
    sources, sizes = [], []
    for i, x in enumerate(ctx.inputs):
        if isinstance(x, Cropped):
            sources.append(x.source)
            sizes.append(tuple(b - a for a, b in x.box))
        else:
            sources.append(ctx.value(i))
            sizes.append(sources[-1].shape[1:])
    target = tuple(min(s[a] for s in (v.shape[1:] for v in sources)) for a in range(len(sizes[0])))
    for x, size in zip(ctx.inputs, sizes):
        box = x.box if isinstance(x, Cropped) else None
        if size != target or (box is not None and box != centre_crop(x.source.shape[1:], target)):
            raise Refused(f"it joins maps cropped to {size} by {box}", expected=f"every map cropped around its "
                          f"centre to the smallest one's {target} (start (size − {target}) // 2)")
    return ctx.add("CropConcat", {}, sources)
