"""Input and Output: the graph's input tensor ``input`` and output tensor ``output``."""

from __future__ import annotations

from core.onnx_export._graph import GRAPH_INPUT, ExportContext, exports


@exports("Input")
def input_(ctx: ExportContext) -> str:
    return GRAPH_INPUT


@exports("Output")
def output(ctx: ExportContext) -> str:
    return ctx.graph_output(ctx.inputs[0])
