"""Folding an ONNX model's constants, within a budget.

The import evaluates every node whose inputs are all constants (shape subgraphs such as
``Shape → Gather → Unsqueeze → Concat``, weight reshapes, ``ConstantOfShape`` placeholders) with the
``onnx`` package's reference implementation. Unbounded, a 306-byte file asks it for gigabytes (a
``ConstantOfShape`` of a large shape, an ``Expand``, a ``Tile``) and a ``Loop`` runs for hours. So:

- only the ops of shape and weight arithmetic are folded (:data:`FOLDABLE`), each with a rule that
  gives its output's size from its inputs' shapes and values *before* it is computed; a size over
  :attr:`FoldBudget.max_elements` is refused naming the node (a matrix product also by its
  multiply-accumulates);
- what has been folded is counted: all folded constants together at most
  :attr:`FoldBudget.max_total_bytes`, and the folding at most :attr:`FoldBudget.max_seconds` of time;
  past either the import stops with a problem naming the node it had reached.

Control flow never gets here (:mod:`core.onnx_import._load` refuses subgraphs). The portal passes a
tighter budget than the command line's default (``portal.limits.ONNX_FOLD_BUDGET``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from core.onnx_import._graph import Refused

Inputs = Sequence["np.ndarray | None"]
MAX_RANK = 16


@dataclass(frozen=True)
class FoldBudget:
    """What folding one model's constants may cost."""

    max_elements: int = 2**27  # one folded tensor: 512 MB of float32 (VGG-19's largest weight has 103 M)
    max_total_bytes: int = 2**32  # every folded tensor together
    max_seconds: float = 300.0  # the reference evaluator's time, all nodes together
    max_macs: int = 2**34  # one folded MatMul/Gemm


class FoldRefused(Refused):
    """A node that is not folded: what it asked for (``received``) and what the budget allows."""

    def __init__(self, message: str, expected: str | None = None, fix: str | None = None,
                 received: str | None = None) -> None:
        super().__init__(message, expected, fix)
        self.received = received


class BudgetSpent(FoldRefused):
    """The whole model's budget is spent: the import stops here."""


def _shape_values(a: np.ndarray | None, what: str) -> list[int]:
    if a is None:
        raise FoldRefused(f"its {what} is missing")
    flat = np.asarray(a).reshape(-1)
    if flat.size > MAX_RANK or not np.issubdtype(flat.dtype, np.integer):
        raise FoldRefused(f"its {what} is not a short list of integers", received=f"{flat.size} values of {flat.dtype}",
                      expected=f"at most {MAX_RANK} integers")
    return [int(v) for v in flat]


def _broadcast(*shapes: Sequence[int]) -> int:
    """The element count of the broadcast of ``shapes`` (the larger size where two differ)."""
    rank = max((len(s) for s in shapes), default=0)
    dims = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            dims[j] = max(dims[j], abs(int(d)))
    return math.prod(dims)


def _shape(a: np.ndarray | None) -> tuple[int, ...]:
    return () if a is None else tuple(np.shape(a))


def _size(a: np.ndarray | None) -> int:
    return 0 if a is None else int(np.size(a))


def _elementwise(node: NodeProto, ins: Inputs) -> int:
    return _broadcast(*(_shape(a) for a in ins))


def _first(node: NodeProto, ins: Inputs) -> int:
    return _size(ins[0]) if ins else 0


def _concat(node: NodeProto, ins: Inputs) -> int:
    return sum(_size(a) for a in ins)


def _constant_of_shape(node: NodeProto, ins: Inputs) -> int:
    dims = _shape_values(ins[0] if ins else None, "shape")
    if any(d < 0 for d in dims):
        raise FoldRefused(f"its shape {dims} has a negative size")
    return math.prod(dims)


def _expand(node: NodeProto, ins: Inputs) -> int:
    return _broadcast(_shape(ins[0]), _shape_values(ins[1] if len(ins) > 1 else None, "shape"))


def _tile(node: NodeProto, ins: Inputs) -> int:
    repeats = _shape_values(ins[1] if len(ins) > 1 else None, "repeats")
    if any(r < 0 for r in repeats):
        raise FoldRefused(f"its repeats {repeats} are negative")
    return _size(ins[0]) * math.prod(repeats)


def _range(node: NodeProto, ins: Inputs) -> int:
    start, limit, delta = (float(np.asarray(a).reshape(-1)[0]) if _size(a) else math.nan for a in ins[:3])
    if not all(math.isfinite(v) for v in (start, limit, delta)) or delta == 0:
        raise FoldRefused(f"Range({start}, {limit}, {delta}) has no finite length",
                      expected="finite start and limit and a non-zero delta")
    return max(0, math.ceil((limit - start) / delta))


def _gather(node: NodeProto, ins: Inputs) -> int:
    data, indices = (_shape(ins[0]), _shape(ins[1])) if len(ins) > 1 else ((), ())
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    along = data[axis] if data and -len(data) <= axis < len(data) else 1
    return math.prod(data) // max(along, 1) * math.prod(indices)


def _matmul(node: NodeProto, ins: Inputs, budget: FoldBudget) -> int:
    a, b = (list(_shape(ins[0])), list(_shape(ins[1]))) if len(ins) > 1 else ([], [])
    if node.op_type == "Gemm":
        trans = {x.name: x.i for x in node.attribute}
        a = a[::-1] if trans.get("transA") else a
        b = b[::-1] if trans.get("transB") else b
    a, b = (a if len(a) > 1 else [1, *a]), (b if len(b) > 1 else [*b, 1])
    rows, inner, cols = a[-2], a[-1], b[-1]
    batch = _broadcast(a[:-2], b[:-2])
    if batch * rows * inner * cols > budget.max_macs:
        raise FoldRefused(f"folding it would take {batch * rows * inner * cols:,} multiply-accumulates",
                      expected=f"at most {budget.max_macs:,} for a folded matrix product")
    return batch * rows * cols


_ELEMENTWISE = ("Add Sub Mul Div Pow Mod Neg Abs Sqrt Reciprocal Exp Log Floor Ceil Round Sign Not And Or Xor "
                "Equal Less Greater LessOrEqual GreaterOrEqual Where Min Max Sum Mean Clip Cast CastLike "
                "Relu Sigmoid Tanh Erf DequantizeLinear BitShift").split()
_AT_MOST_FIRST = ("Identity Reshape Flatten Squeeze Unsqueeze Transpose Slice Split Dropout ReduceSum ReduceMean "
                  "ReduceMax ReduceMin ReduceProd ReduceL2 ArgMax ArgMin CumSum Shape Size").split()
FOLDABLE: dict[str, Callable[[NodeProto, Inputs], int]] = {
    **dict.fromkeys(_ELEMENTWISE, _elementwise),
    **dict.fromkeys(_AT_MOST_FIRST, _first),
    "Concat": _concat,
    "ConstantOfShape": _constant_of_shape,
    "Expand": _expand,
    "Tile": _tile,
    "Range": _range,
    "Gather": _gather,
    "NonZero": lambda node, ins: _size(ins[0]) * max(len(_shape(ins[0])), 1),
}


def _to_string(node: NodeProto, ins: Inputs) -> bool:
    """Whether a Cast (or CastLike) makes strings: one Python object per element, beyond any byte count."""
    if node.op_type == "CastLike":
        return len(ins) > 1 and ins[1] is not None and np.asarray(ins[1]).dtype.kind in "OUS"
    return any(a.name == "to" and a.i == TensorProto.STRING for a in node.attribute)


def planned_elements(node: NodeProto, ins: Inputs, budget: FoldBudget) -> int:
    """The elements folding ``node`` computes, from its inputs' shapes and values; :class:`FoldRefused`
    when the op is not foldable or the size is over the budget."""
    if node.op_type in ("Cast", "CastLike") and _to_string(node, ins):
        raise FoldRefused("casts constants to strings, which are not shape or weight arithmetic",
                          expected="a cast to a numeric type")
    if node.op_type in ("MatMul", "Gemm"):
        planned = _matmul(node, ins, budget)
    elif node.op_type in FOLDABLE:
        planned = FOLDABLE[node.op_type](node, ins)
    else:
        raise FoldRefused("is computed from constants only, and the import folds only shape and weight arithmetic",
                      expected=f"one of {', '.join(sorted([*FOLDABLE, 'MatMul', 'Gemm']))} on constants",
                      fix="fold the model's constants before importing it (onnxsim)")
    if planned > budget.max_elements:
        raise FoldRefused(f"folding it would compute a constant of {planned:,} elements",
                      received=f"{node.op_type} on constant inputs of shapes {[list(_shape(a)) for a in ins]}",
                      expected=f"at most {budget.max_elements:,} elements per folded constant",
                      fix="give the model its weights as initialisers of their real size")
    return planned


def evaluate(node: NodeProto, feeds: dict[str, np.ndarray], opset: int) -> list[np.ndarray]:
    """Evaluate one node on constant inputs with the onnx package's reference implementation."""
    if node.op_type == "Constant":
        attr = node.attribute[0]
        value = helper.get_attribute_value(attr)
        return [numpy_helper.to_array(value)] if attr.name == "value" else [np.asarray(value)]
    graph = helper.make_graph(
        [node], "fold",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in node.output if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


class Folder:
    """Folds nodes one at a time and keeps the model's account against its :class:`FoldBudget`."""

    def __init__(self, budget: FoldBudget, opset: int) -> None:
        self.budget, self.opset = budget, opset
        self.bytes = 0
        self.seconds = 0.0

    def fold(self, node: NodeProto, names: Sequence[str], ins: Inputs) -> list[np.ndarray]:
        """The node's outputs; :class:`FoldRefused` (or :class:`BudgetSpent`) naming what is over the budget."""
        if node.op_type != "Constant":  # a Constant's value is in the file already
            planned_elements(node, ins, self.budget)
        feeds = {i: x for i, x in zip(names, ins) if i and isinstance(x, np.ndarray)}
        start = time.perf_counter()
        outputs = evaluate(node, feeds, self.opset)
        self.seconds += time.perf_counter() - start
        self.bytes += sum(int(a.nbytes) for a in outputs)
        if self.bytes > self.budget.max_total_bytes:
            raise BudgetSpent(f"the folded constants reach {self.bytes:,} bytes here",
                              expected=f"at most {self.budget.max_total_bytes:,} bytes of folded constants",
                              fix="give the model its weights as initialisers of their real size")
        if self.seconds > self.budget.max_seconds:
            raise BudgetSpent(f"folding the model's constants has taken {self.seconds:.0f} s by this node",
                              expected=f"at most {self.budget.max_seconds:.0f} s",
                              fix="fold the model's constants before importing it (onnxsim)")
        return outputs
