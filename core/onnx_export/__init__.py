"""ONNX written directly from a pipeline spec and its canonical weights: no framework involved.

One exporter per op (``@exports("Conv2d")``), in one module per op family named like
:mod:`core.ops`; :func:`export_onnx` walks the validated graph in topological order and asks each
node's exporter for its ONNX nodes. The weights are the canonical ones (:mod:`core.weights`:
torch's layout, keys ``"<node id>/<name>"``), so the same file comes out whichever framework
trained them; a canonical weight that ONNX takes as it is keeps its key as its initialiser's name.

The model: opset :data:`OPSET` (default domain only), IR version 8, input ``input`` of shape
``(batch, *input_shape)`` (float32, or int64 token ids) and output ``output`` of shape
``(batch, *output_shape)``, in the drawing's channels-first layout — what every generated
program's ``forward_numpy`` takes and returns. Inference form: Dropout is the identity, BatchNorm
uses its running statistics. See docs/onnx.md.

An op without an exporter, or weights that do not fit the graph (missing, misshapen, unknown), is
refused with every :class:`~core.errors.Problem` at once, naming the node.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, helper

from core.errors import FlowTrainError, Problem
from core.onnx_export import (  # noqa: F401  (imported for their registrations)
    activation,
    attention,
    conv,
    dense,
    dropout,
    embedding,
    io,
    local_norm,
    merge,
    norm,
    one_to_one,
    pool,
    recurrent,
    resize,
    shape,
    shuffle,
    tokens,
)
from core.onnx_export._graph import (
    EXPORTERS,
    GRAPH_INPUT,
    GRAPH_OUTPUT,
    ONNX_DTYPES,
    ExportContext,
    ExporterRegistry,
    GraphParts,
    exports,
)
from core.spec import PipelineSpec
from core.validate import Analysis, validate
from core.weights import canonical_shapes

__all__ = ["EXPORTERS", "OPSET", "ExportError", "ExporterRegistry", "export_onnx", "exports", "save_onnx",
           "unsupported_problems", "weight_problems"]

OPSET = 17  # LayerNormalization's first opset; onnxruntime ≥ 1.12, TensorRT 8.6 and OpenVINO read it
IR_VERSION = 8  # the IR version of opset 17: runtimes that read the opset read the file
PRODUCER = "FlowTrain"
# Protobuf cannot serialise a message of 2 GiB or more: larger weights go to a file beside the model.
EXTERNAL_DATA_BYTES = 1 << 30


class ExportError(FlowTrainError):
    """The graph or its weights cannot be exported; carries every problem found."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        lines = [f"{len(self.problems)} problem(s) exporting to ONNX:"] + [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


def unsupported_problems(analysis: Analysis, registry: ExporterRegistry = EXPORTERS) -> list[Problem]:
    """Every node whose op has no ONNX exporter, naming the op and the node."""
    supported = sorted(registry.exporters)
    return [Problem(f"model.nodes[{node.id}]", f"cannot be exported to ONNX: no exporter for {node.op}",
                    node=node.id, received=node.op, expected="one of " + ", ".join(supported),
                    fix="replace the node, or add an exporter (docs/onnx.md)")
            for node in analysis.nodes.values() if not registry.supports(node.op)]


def weight_problems(analysis: Analysis, weights: Mapping[str, np.ndarray]) -> list[Problem]:
    """Missing, misshapen, non-float and unknown canonical weights, each named by its key."""
    shapes = canonical_shapes(analysis)
    problems = []
    for key, want in shapes.items():
        node = key.split("/", 1)[0]
        if key not in weights:
            problems.append(Problem(f"weights[{key}]", "is missing", node=node, expected=f"an array of shape {want}"))
            continue
        array = np.asarray(weights[key])
        if tuple(array.shape) != want or array.dtype.kind != "f":
            problems.append(Problem(f"weights[{key}]", "does not fit the graph", node=node,
                                    received=f"{array.dtype} {tuple(array.shape)}", expected=f"float {want}"))
    unknown = sorted(set(weights) - set(shapes))
    if unknown:
        problems.append(Problem("weights", f"has {len(unknown)} key(s) the graph does not have",
                                received=", ".join(unknown[:10]) + (" …" if len(unknown) > 10 else ""),
                                expected="keys '<node id>/<weight name>' of this graph's weighted nodes",
                                fix="were the weights saved for another spec?"))
    return problems


def export_onnx(spec: PipelineSpec, weights: Mapping[str, np.ndarray], *, analysis: Analysis | None = None,
                registry: ExporterRegistry = EXPORTERS) -> ModelProto:
    """The ONNX model of ``spec`` with ``weights`` (canonical); raises :class:`ExportError`."""
    analysis = analysis or validate(spec)
    problems = unsupported_problems(analysis, registry) + weight_problems(analysis, weights)
    if problems:
        raise ExportError(problems)
    if analysis.input_id is None or analysis.output_id is None:
        raise ValueError("the graph has no Input or Output node; validate the spec before exporting it")
    parts = GraphParts(names={GRAPH_INPUT, GRAPH_OUTPUT})
    by_node: dict[str, dict[str, np.ndarray]] = {}
    for key in canonical_shapes(analysis):
        node_id, name = key.split("/", 1)
        by_node.setdefault(node_id, {})[name] = np.asarray(weights[key])
    tensors: dict[str, str] = {}
    for node in analysis.nodes.values():
        ctx = ExportContext(analysis, node, [tensors[s] for s in node.inputs], by_node.get(node.id, {}), parts,
                            node.id)
        tensors[node.id] = registry.get(node.op)(ctx)
    inp, out = analysis.nodes[analysis.input_id].output, analysis.nodes[analysis.output_id].output
    graph = helper.make_graph(
        parts.nodes, _graph_name(spec.name),
        [helper.make_tensor_value_info(GRAPH_INPUT, ONNX_DTYPES[inp.dtype], ["batch", *inp.shape])],
        [helper.make_tensor_value_info(GRAPH_OUTPUT, ONNX_DTYPES[out.dtype], ["batch", *out.shape])],
        parts.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name=PRODUCER,
                              doc_string=spec.description or spec.name)
    model.ir_version = IR_VERSION
    helper.set_model_props(model, {"flowtrain.spec_name": spec.name, "flowtrain.spec_hash": spec.spec_hash(),
                                   "flowtrain.layout": "channels-first, as drawn"})
    return model


def save_onnx(model: ModelProto, path: str | Path) -> Path:
    """Check ``model`` and write it atomically; weights of 1 GiB or more go to ``<name>.data`` beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    large = sum(t.ByteSize() for t in model.graph.initializer) >= EXTERNAL_DATA_BYTES
    if large:
        onnx.save_model(model, tmp, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data")
        onnx.checker.check_model(str(tmp))
    else:
        onnx.checker.check_model(model)
        onnx.save_model(model, tmp)
    os.replace(tmp, path)
    return path


def _graph_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in name) or "flowtrain"
