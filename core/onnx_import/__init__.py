"""ONNX → pipeline spec and canonical weights (``python -m flowtrain import-onnx``, the editor's Import ONNX).

The model is read by :mod:`core.onnx_import._load` (external data from a model file's own folder only,
never for bytes; the node count and control flow checked before the walk). The ONNX graph is walked in
its (topological) order. Constants are folded on the way, within a :class:`FoldBudget`
(:mod:`core.onnx_import._fold`): initialisers, ``Constant`` nodes, every node of shape or weight
arithmetic whose inputs are all constants (evaluated by the ``onnx`` package's reference
implementation: shape subgraphs, weight reshapes, ``ConstantOfShape`` placeholders) and
``Shape`` of a computed tensor (its shape is static: the import fixes the input's size). Every other
node goes to the importer of its op type (one per ONNX op, in modules named like :mod:`core.ops`'s
families), which emits catalogue nodes with their canonical weights (torch's layout: what every
framework's program loads). What the catalogue has no op for is refused: every unsupported node at
once, each :class:`~core.errors.Problem` naming the ONNX op type, node name and opset, and listing
the ONNX ops that can be imported.

The spec keeps ONNX's channels-first layout; the batch axis is dropped (a Reshape's target must keep
it first). A Softmax whose output is the graph's output is dropped: the loss head (cross-entropy on
logits) applies it, so the imported network ends in logits. A classifier's (C, 1, 1) output gets a
Flatten so that the cross-entropy head takes it. See docs/onnx.md.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, numpy_helper

from core.block_folding import fold_repeats
from core.errors import Problem, SpecError
from core.onnx_import import (  # noqa: F401  (imported for their registrations)
    activation,
    conv,
    dense,
    merge,
    norm,
    one_to_one,
    pool,
    resize,
    shape,
)
from core.onnx_import._fold import BudgetSpent, FoldBudget, Folder, FoldRefused
from core.onnx_import._graph import (
    IMPORTERS,
    GraphBuilder,
    Imported,
    ImporterRegistry,
    NodeContext,
    Refused,
    Value,
    imports,
)
from core.onnx_import._load import load_model
from core.onnx_import._patterns import Fused, find_patterns
from core.onnx_import.activation import match_gelu, match_gelu_tanh
from core.onnx_import.attention import match_attention
from core.spec import PipelineSpec
from core.validate import validate

__all__ = ["IMPORTERS", "FoldBudget", "ImportResult", "ImporterRegistry", "import_onnx", "imports", "save_import"]

_MISSING: Any = object()  # an input whose producer was refused
MIN_OPSET = 7  # older files use attribute forms (consumed_inputs, is_test…) the importers do not read


@dataclass
class ImportResult:
    """The imported spec, its canonical weights and what the import changed on the way (``notes``)."""

    spec: PipelineSpec
    weights: dict[str, np.ndarray]
    output_tensor: str  # the ONNX tensor the spec's Output yields (before a dropped Softmax)
    notes: list[str] = field(default_factory=list)


def _opset(model: ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else 1


def _problem(node: NodeProto, opset: int, message: str, expected: str | None = None,
             fix: str | None = None, received: str | None = None) -> Problem:
    name = node.name or (node.output[0] if node.output else "?")
    return Problem(f"onnx.nodes[{name}]", f"{node.op_type} (opset {opset}): {message}",
                   received=received or node.op_type, expected=expected, fix=fix)


def _graph_input(model: ModelProto) -> tuple[str, tuple[int, ...], int, str]:
    """The one non-initialiser input: its name, shape without the batch axis, batch size (1 if symbolic) and
    dtype (float32, or int64 token ids (batch, T))."""
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise SpecError([Problem("onnx.inputs", f"the model has {len(inputs)} inputs",
                                 received=", ".join(i.name for i in inputs) or "none",
                                 expected="exactly one input (the images or features)")])
    tensor = inputs[0].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
    tokens = tensor.elem_type == onnx.TensorProto.INT64 and len(dims) == 2
    if (tensor.elem_type != onnx.TensorProto.FLOAT and not tokens) or len(dims) < 2 or any(d < 1 for d in dims[1:]):
        raise SpecError([Problem(f"onnx.inputs[{inputs[0].name}]", "the input is not float32 of a fixed size",
                                 received=f"type {onnx.TensorProto.DataType.Name(tensor.elem_type)}, shape {dims}",
                                 expected="float32 of shape (batch, C, H, W) or (batch, F), or int64 token ids "
                                          "(batch, T), sizes fixed after the batch axis",
                                 fix="export the model with a fixed input size")])
    return inputs[0].name, tuple(dims[1:]), dims[0] or 1, "int64" if tokens else "float32"


def _trailing_softmax(model: ModelProto) -> NodeProto | None:
    """The Softmax whose output is the graph's only output and read by nothing else, if any."""
    if len(model.graph.output) != 1:
        return None
    out = model.graph.output[0].name
    readers = Counter(i for n in model.graph.node for i in n.input)
    for node in model.graph.node:
        if node.op_type == "Softmax" and out in node.output and readers[out] == 0:
            return node
    return None


def _unsupported(node: NodeProto, opset: int) -> Problem:
    return _problem(node, opset, "this ONNX op cannot be imported: the op catalogue has no equivalent",
                    expected=f"one of the supported ONNX ops: {', '.join(IMPORTERS.names())}",
                    fix="replace the op in the source model (or ask for it to be added to the catalogue)")


def _initialisers(model: ModelProto) -> dict[str, np.ndarray]:
    consts, problems = {}, []
    for init in model.graph.initializer:
        try:
            consts[init.name] = numpy_helper.to_array(init)
        except (ValueError, TypeError) as exc:  # dims that do not fit the data, an unknown type
            problems.append(Problem(f"onnx.initializers[{init.name}]", f"cannot be read: {exc}",
                                    received=f"dims {list(init.dims)}, type {init.data_type}",
                                    expected="data that fills the declared dims"))
    if problems:
        raise SpecError(problems)
    return consts


def import_onnx(source: ModelProto | bytes | str | Path, name: str | None = None,
                weights_file: str | None = None, budget: FoldBudget | None = None, fold: bool = True) -> ImportResult:
    """Import an ONNX model; :class:`SpecError` with every problem when it cannot be (see the module doc).

    ``weights_file`` becomes the spec's ``training.init_weights`` (the caller writes the weights there);
    ``budget`` bounds the folding of constants (:class:`FoldBudget`'s defaults when None); ``fold``
    folds repeated structure into blocks (:mod:`core.block_folding`; the weights follow their nodes).
    """
    model = load_model(source)
    opset = _opset(model)
    if opset < MIN_OPSET:
        raise SpecError([Problem("onnx.opset_import", f"opset {opset} is older than the importer reads",
                                 received=str(opset), expected=f"opset ≥ {MIN_OPSET}",
                                 fix="convert the model to a newer opset (onnx.version_converter)")])
    foreign = [n for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    in_name, in_shape, batch, in_dtype = _graph_input(model)
    builder = GraphBuilder(batch=batch)
    source_value = builder.add("Input", {"shape": list(in_shape), **({"dtype": "int64"} if in_dtype == "int64" else {})},
                               [], "input")
    consts = _initialisers(model)
    folder = Folder(budget or FoldBudget(), opset)
    values: dict[str, Imported] = {in_name: source_value}
    readers = Counter(i for n in model.graph.node for i in n.input if i)
    for o in model.graph.output:
        readers[o.name] += 1
    dropped = _trailing_softmax(model)
    problems = [_problem(n, opset, f"op domain {n.domain!r} is not the standard one", expected="ONNX's own ops")
                for n in foreign]
    notes: list[str] = []
    fusions = find_patterns(model.graph, consts, {"Softmax": match_attention, "Erf": match_gelu,
                                                     "Tanh": match_gelu_tanh})
    for index, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx") or index in fusions.skipped:
            continue
        if index in fusions.blocks:
            _emit_fused(fusions.blocks[index], node, opset, builder, values, problems)
            continue
        ins = [None if not i else consts.get(i, values.get(i, _MISSING)) for i in node.input]
        constant = node.op_type == "Constant" or bool(ins) and all(isinstance(x, np.ndarray) or x is None for x in ins)
        if not constant and node.op_type != "Shape" and not IMPORTERS.supports(node.op_type):
            problems.append(_unsupported(node, opset))
            continue
        if any(x is _MISSING for x in ins):
            continue  # downstream of a refused node: its problem is reported already
        if node is dropped:
            values[node.output[0]] = ins[0]  # type: ignore[assignment]
            notes.append(f"the final Softmax ({node.name or node.output[0]}) is left to the loss head")
            continue
        if constant:
            try:
                consts.update(zip(node.output, folder.fold(node, node.input, ins)))  # type: ignore[arg-type]
            except FoldRefused as err:
                problems.append(_problem(node, opset, err.message, err.expected, err.fix, err.received))
                if isinstance(err, BudgetSpent):
                    raise SpecError(problems) from None
            except Exception as exc:  # noqa: BLE001  (the reference evaluator on a malformed node: the file's problem)
                problems.append(_problem(node, opset, f"cannot be evaluated: {type(exc).__name__}: {exc}"))
            continue
        if node.op_type == "Shape":
            if isinstance(ins[0], Value):
                full = np.array([batch, *ins[0].shape], dtype=np.int64)
                start, end = _shape_range(node, len(full))
                consts[node.output[0]] = full[start:end]
            else:
                problems.append(_problem(node, opset, "reads the shape of a split channel axis or a pending Pad",
                                         expected="the shape of a tensor the catalogue computes"))
            continue
        ctx = NodeContext(node, opset, builder, ins, [readers[i] == 1 for i in node.input])  # type: ignore[arg-type]
        try:
            out = IMPORTERS.functions[node.op_type](ctx)
        except Refused as err:
            problems.append(_problem(node, opset, err.message, err.expected, err.fix))
            continue
        if out is not None:
            values[node.output[0]] = out
    if problems:
        raise SpecError(problems)
    return _finish(model, builder, values, consts, name, weights_file, notes, dropped, fold)


def _emit_fused(fused: Fused, node: NodeProto, opset: int, builder: GraphBuilder, values: dict[str, Imported],
                problems: list[Problem]) -> None:
    """A recognised pattern becomes one catalogue node (:mod:`core.onnx_import._patterns`)."""
    x = values.get(fused.source)
    if x is None:
        return  # downstream of a refused node: its problem is reported already
    if not isinstance(x, Value):
        problems.append(_problem(node, opset, f"the {fused.op} it ends reads an intermediate form",
                                 expected="a sequence (T, E) computed by the network"))
        return
    try:
        values[fused.output] = builder.add(fused.op, fused.params, [x], fused.hint, fused.weights)
    except Refused as err:
        problems.append(_problem(node, opset, err.message, err.expected, err.fix))


def _folded(builder: GraphBuilder, notes: list[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The model section with its repeated structure folded into blocks, and the weights under their new ids."""
    folded = fold_repeats(builder.nodes, builder.edges)
    if not folded.blocks:
        return {"nodes": builder.nodes, "edges": builder.edges}, builder.weights
    weights = {}
    for key, array in builder.weights.items():
        node, _, name = key.partition("/")
        weights[f"{folded.renamed.get(node, node)}/{name}"] = array
    notes.append(f"repeated structure is folded into {len(folded.blocks)} blocks "
                 f"({', '.join(b['name'] for b in folded.blocks)}): {len(folded.nodes)} nodes instead of "
                 f"{len(builder.nodes)}, the same network")
    return {"nodes": folded.nodes, "edges": folded.edges, "blocks": folded.blocks}, weights


def _shape_range(node: NodeProto, rank: int) -> tuple[int, int]:
    """A Shape node's ``start`` and ``end`` (opset 15: the dims it returns), clamped as ONNX says."""
    attrs = {a.name: a.i for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    return (min(max(start + rank if start < 0 else start, 0), rank),
            min(max(end + rank if end < 0 else end, 0), rank))


def _finish(model: ModelProto, builder: GraphBuilder, values: dict[str, Imported], consts: dict[str, np.ndarray],
            name: str | None, weights_file: str | None, notes: list[str], dropped: NodeProto | None,
            fold: bool) -> ImportResult:
    if len(model.graph.output) != 1:
        raise SpecError([Problem("onnx.outputs", f"the model has {len(model.graph.output)} outputs",
                                 expected="exactly one output (the prediction)")])
    out_name = model.graph.output[0].name
    result = values.get(out_name)
    if not isinstance(result, Value):
        raise SpecError([Problem(f"onnx.outputs[{out_name}]", "the output is not computed from the input",
                                 received="a constant" if out_name in consts else
                                 "an intermediate form (a split channel axis or a pending Pad)",
                                 expected="a tensor computed from the model's input")])
    output_tensor = dropped.input[0] if dropped is not None else out_name
    if len(result.shape) == 3 and result.shape[1:] == (1, 1) and result.shape[0] > 1:
        result = builder.add("Flatten", {}, [result], "flatten_output")
        notes.append(f"the ({result.shape[0]}, 1, 1) output is flattened to ({result.shape[0]},) for the loss head")
    builder.add("Output", {}, [result], "output")
    classify = len(result.shape) == 1 and result.shape[0] > 1
    in_shape = list(builder.params[builder.nodes[0]["id"]]["shape"])
    spec_name = (name or model.graph.name or "imported")[:200]
    section, weights = _folded(builder, notes) if fold else ({"nodes": builder.nodes, "edges": builder.edges},
                                                             builder.weights)
    data: dict[str, Any] = {"source": "data", "format": "image_folder" if len(in_shape) == 3 else "npz",
                            "input_shape": in_shape, "task": "classification" if classify else "regression",
                            **({"num_classes": result.shape[0]} if classify else {})}
    if builder.params[builder.nodes[0]["id"]]["dtype"] == "int64":
        data, classify = _token_data(builder, in_shape, result)
    doc: dict[str, Any] = {
        "name": spec_name,
        "description": f"Imported from ONNX (opset {_opset(model)}, producer {model.producer_name or 'unknown'} "
                       f"{model.producer_version}".rstrip() + ")",
        "data": data,
        "model": section,  # the editor lays it out
        "training": {"loss": "cross_entropy" if classify else "mse",
                     **({"init_weights": weights_file} if weights_file else {})},
    }
    spec = PipelineSpec.model_validate(doc)
    validate(spec)  # raises SpecError with every problem: an import must yield a valid spec
    return ImportResult(spec, weights, output_tensor, notes)


def _token_data(builder: GraphBuilder, in_shape: list[int], result: Value) -> tuple[dict[str, Any], bool]:
    """The data layer of a model reading token ids: a language model's token stream when it predicts one of
    its Embedding's ids at every position ((T, V) scores), else a tokenized text column (regression)."""
    vocabularies = {p["num_embeddings"] for n, p in builder.params.items() if builder.ops[n] == "Embedding"}
    if len(in_shape) == 1 and result.shape == (in_shape[0], *result.shape[1:]) and len(result.shape) == 2 \
            and result.shape[1] in vocabularies:
        return {"source": "tokens.bin", "task": "language_modeling", "block_size": in_shape[0],
                "vocab_size": result.shape[1]}, True
    return {"source": "texts.csv", "format": "csv", "task": "regression", "input_shape": in_shape,
            "preprocessing": [{"op": "tokenize", "column": "text", "max_length": in_shape[0]}]}, False


def save_import(result: ImportResult, spec_path: str | Path) -> tuple[Path, Path]:
    """Write the spec and its weights (``<stem>.weights.npz`` next to it, named by ``training.init_weights``)."""
    spec_path = Path(spec_path)
    weights_name = result.spec.training.init_weights or f"{spec_path.stem}.weights.npz"
    weights_path = spec_path.parent / weights_name
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(weights_path, **result.weights)
    spec_path.write_text(result.spec.to_json() + "\n")
    return spec_path, weights_path


def weights_name(spec_path: str | Path) -> str:
    """The weights file an import writes next to ``spec_path``."""
    return re.sub(r"\.json$", "", Path(spec_path).name) + ".weights.npz"

