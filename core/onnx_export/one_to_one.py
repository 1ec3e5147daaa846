"""Every op that is one ONNX operator (it declares :class:`~core.ops.registry.OnnxOp` as ``onnx``):
that operator on the node's inputs, with the op's parameters as its attributes. One exporter for
all of them, registered here for each declaring op, so such an op needs no exporter of its own."""

from __future__ import annotations

from core.onnx_export._graph import EXPORTERS, ExportContext
from core.ops import REGISTRY as OPS


def one_operator(ctx: ExportContext) -> str:
    declared = OPS.get(ctx.node.op).onnx
    assert declared is not None  # registered only for ops that declare one
    attributes = {name: ctx.params[attr.param] for name, attr in declared.attributes.items()}
    return ctx.op(declared.op_type, ctx.inputs, ctx.out, **attributes)


EXPORTERS.register(*(name for name in OPS.names() if OPS.get(name).onnx is not None))(one_operator)
