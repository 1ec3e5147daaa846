"""Every ONNX operator that is one op of the catalogue (the op declares it as ``onnx``,
:class:`~core.ops.registry.OnnxOp`): the op on the node's inputs, its parameters from the node's
attributes (ONNX's defaults where the node leaves one out). An attribute the declaration does not
name is refused, never ignored. One importer for all of them, registered here per ONNX op type."""

from __future__ import annotations

from typing import Any

from core.onnx_import._graph import NodeContext, Refused, Value, imports
from core.ops import REGISTRY as OPS
from core.ops.registry import Op

_BY_TYPE: dict[str, type[Op]] = {}
for _name in OPS.names():
    _op = OPS.get(_name)
    if _op.onnx is not None:
        if _op.onnx.op_type in _BY_TYPE:  # a programming error in the ops' declarations
            raise ValueError(f"ONNX {_op.onnx.op_type} is declared by both {_BY_TYPE[_op.onnx.op_type].name} "
                             f"and {_name}")
        _BY_TYPE[_op.onnx.op_type] = _op


def _cast(kind: str, value: Any) -> Any:
    return float(value) if kind == "float" else int(value) if kind == "int" else value


@imports(*_BY_TYPE)
def one_op(ctx: NodeContext) -> Value:
    op = _BY_TYPE[ctx.node.op_type]
    declared = op.onnx
    assert declared is not None
    unknown = sorted(a.name for a in ctx.node.attribute if a.name not in declared.attributes)
    if unknown:
        names = ", ".join(declared.attributes) or "none"
        raise Refused(f"has the attribute(s) {', '.join(unknown)}, which {op.name} has no parameter for",
                      expected=f"only the attributes {names}")
    params = {attr.param: _cast(op.param(attr.param).kind, ctx.attr(name, attr.default))
              for name, attr in declared.attributes.items()}
    return ctx.add(op.name, params, [ctx.value(i) for i in range(len(ctx.node.input))])
