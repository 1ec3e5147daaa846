"""The ONNX exporters' machinery: the registry (one exporter per op) and what an exporter sees.

An exporter is a function ``(ctx: ExportContext) -> str``: it adds the ONNX nodes that compute one
node of the spec from its inputs' tensor names (``ctx.inputs``) and returns the name of the tensor
it produced, conventionally ``ctx.out`` (the node id, so a viewer such as Netron shows the drawing's
names). Weights enter as initialisers: ``ctx.weight(name)`` for a canonical weight as it is (torch's
layout is ONNX's for Conv, ConvTranspose, Gemm, BatchNormalization, LayerNormalization, Gather),
``ctx.const(name, array)`` for one an exporter derives (a transposed matrix, reordered gates).

Shapes in ``ctx`` exclude the batch axis, as everywhere in :mod:`core.ops`; the ONNX tensors carry
it as their first axis (named ``batch`` on the graph's input and output).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from core.ops.per_op import PerOpRegistry
from core.validate import Analysis, NodeInfo

GRAPH_INPUT, GRAPH_OUTPUT = "input", "output"  # the graph's tensor names (reserved: no node takes them)
ONNX_DTYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64}


@dataclass
class GraphParts:
    """What the exporters of one graph have added so far."""

    nodes: list[NodeProto] = field(default_factory=list)
    initializers: list[TensorProto] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    weights: dict[str, str] = field(default_factory=dict)  # canonical key -> its initialiser (a tied head reads it)

    def unique(self, name: str) -> str:
        """``name``, or ``name_2``, ``name_3`` … if taken (tensor and initialiser names share one space)."""
        candidate, i = name, 1
        while candidate in self.names:
            i += 1
            candidate = f"{name}_{i}"
        self.names.add(candidate)
        return candidate


@dataclass
class ExportContext:
    """One node of the spec as its exporter sees it."""

    analysis: Analysis
    node: NodeInfo
    inputs: list[str]  # tensor names of the node's inputs, in port order
    weights: Mapping[str, np.ndarray]  # this node's canonical weights by name ("weight", "bias", …)
    parts: GraphParts
    out: str  # the name the node's result should get

    @property
    def params(self) -> dict[str, Any]:
        return self.node.params

    @property
    def in_shapes(self) -> list[tuple[int, ...]]:
        """The inputs' shapes without the batch axis."""
        return [self.analysis.nodes[s].output.shape for s in self.node.inputs]

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.node.output.shape

    def weight(self, name: str) -> str:
        """The canonical weight ``<node>/<name>`` as an initialiser of that name (once: a second use of
        the same weight, as a tied head's, reads the same initialiser)."""
        key = f"{self.node.id}/{name}"
        if key not in self.parts.weights:
            self.parts.weights[key] = self.const(name, self.weights[name])
        return self.parts.weights[key]

    def const(self, name: str, value: np.ndarray | float | Sequence[int]) -> str:
        """An initialiser ``<node>/<name>``: float values become float32, integer lists int64."""
        if isinstance(value, np.ndarray):
            array = value.astype(np.float32) if value.dtype.kind == "f" else value
        elif isinstance(value, float):
            array = np.asarray(value, dtype=np.float32)
        else:
            array = np.asarray(value, dtype=np.int64)
        tensor_name = self.parts.unique(f"{self.node.id}/{name}")
        self.parts.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), tensor_name))
        return tensor_name

    def op(self, op_type: str, inputs: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        """Add one ONNX node; returns its output's name: ``out`` (made unique), else ``<node>/<op_type>``."""
        return self.op_outputs(op_type, inputs, 1, out, **attrs)[0]

    def op_outputs(self, op_type: str, inputs: Sequence[str], outputs: int, out: str | None = None,
                   **attrs: Any) -> list[str]:
        """Add one ONNX node with several outputs (LSTM's Y, Y_h, Y_c); returns their names."""
        first = self.parts.unique(out if out is not None else f"{self.node.id}/{op_type}")
        names = [first] + [self.parts.unique(f"{first}:{i}") for i in range(1, outputs)]
        node_name = self.parts.unique(f"{self.node.id}/{op_type}#")
        self.parts.nodes.append(helper.make_node(op_type, list(inputs), names, name=node_name, **attrs))
        return names

    def graph_output(self, x: str) -> str:
        """The graph's output tensor (its name reserved by the builder), a copy of ``x``."""
        self.parts.nodes.append(helper.make_node("Identity", [x], [GRAPH_OUTPUT],
                                                 name=self.parts.unique(f"{self.node.id}/Identity#")))
        return GRAPH_OUTPUT

    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        """Reshape to ``shape`` (with the batch axis: 0 keeps an axis, -1 takes the rest)."""
        return self.op("Reshape", [x, self.const("shape", list(shape))], out)


Exporter = Callable[[ExportContext], str]


class ExporterRegistry(PerOpRegistry[Exporter]):
    """One ONNX exporter per op; a second registration for an op, or one for an unknown op, raises."""

    def __init__(self) -> None:
        super().__init__("onnx", "an exporter")

    @property
    def exporters(self) -> dict[str, Exporter]:
        return self.functions

    def get(self, op: str) -> Exporter:
        return self.functions[op]


EXPORTERS = ExporterRegistry()
exports = EXPORTERS.register


def batch_axis(axis: int) -> int:
    """A per-sample axis (no batch axis) as an axis of the batched ONNX tensor."""
    return axis + 1 if axis >= 0 else axis
