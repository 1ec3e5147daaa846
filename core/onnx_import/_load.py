"""Reading an ONNX model for import, and what it is allowed to reach.

An ONNX tensor may keep its bytes in an external file (``external_data``: ``location``, ``offset``,
``length``). The ``onnx`` package resolves a location against a base folder, and against the process's
working folder when it has none (``numpy_helper.to_array(tensor)`` on bytes that were never a file):
in the portal that is the checkout, which holds every user's registry and runs, so an uploaded
model could turn any file there into a "weight". Hence:

- a model that comes as bytes or as a ``ModelProto`` (an upload, a caller's object) has no folder:
  external data is refused, each tensor named;
- a model file (``import-onnx MODEL.onnx``) may keep its data in files of its own folder only, named
  relative to it: no absolute path, no ``..``, no symbolic link (``onnx.external_data_helper`` reads
  them with the model's folder as base and refuses links and escapes too). The bytes read must be the
  tensor's declared size.

Cheap checks run before the model is parsed or walked: the graph's node count is read from the
protobuf's wire format (stopping at the limit, so a million-node file is refused after reading a
fraction of it); control flow (a node holding a subgraph: Loop, If, Scan) is refused, since the
catalogue has no equivalent and folding a constant Loop runs for as long as its trip count says.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import onnx
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, external_data_helper

from core.errors import FlowTrainError, Problem, SpecError
from core.spec import MAX_NODES

MAX_ONNX_NODES = 2 * MAX_NODES  # shape subgraphs fold away; the spec itself holds at most MAX_NODES nodes
_MODEL_GRAPH_FIELD = 7  # ModelProto.graph
_GRAPH_NODE_FIELD = 1  # GraphProto.node
_UNSIZED = {TensorProto.STRING, TensorProto.UNDEFINED} | {getattr(TensorProto, n) for n in (
    "INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2") if hasattr(TensorProto, n)}


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each top-level field; ValueError on a malformed buffer."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, end = _varint(buf, pos)
        elif wire == 1:
            end = pos + 8
        elif wire == 5:
            end = pos + 4
        elif wire == 2:
            length, pos = _varint(buf, pos)
            end = pos + length
        else:
            raise ValueError(f"wire type {wire}")
        if end > len(buf):
            raise ValueError("truncated field")
        yield field, wire, pos, end
        pos = end


def count_nodes(raw: bytes, limit: int) -> int | None:
    """The top-level graph's node count read from the wire format, stopping once past ``limit``; None
    when the bytes are not a well-formed message (the parser then says what is wrong)."""
    buf = memoryview(raw)
    count = 0
    try:
        for field, wire, start, end in _fields(buf):
            if field != _MODEL_GRAPH_FIELD or wire != 2:
                continue
            for inner, inner_wire, _, _ in _fields(buf[start:end]):
                if inner == _GRAPH_NODE_FIELD and inner_wire == 2:
                    count += 1
                    if count > limit:
                        return count
    except ValueError:
        return None
    return count


def _too_many(count: int) -> Problem:
    return Problem("onnx.nodes", f"the model has more than {MAX_ONNX_NODES:,} nodes",
                   received=f"{count:,} nodes or more" if count > MAX_ONNX_NODES else f"{count:,} nodes",
                   expected=f"at most {MAX_ONNX_NODES:,} nodes (a pipeline holds at most {MAX_NODES:,})",
                   fix="import a smaller model, or simplify it (onnxsim) first")


def load_model(source: ModelProto | bytes | str | Path) -> ModelProto:
    """The model with its external data read in (from a file's own folder only); :class:`SpecError`
    naming each tensor whose data cannot be, or when the cheap checks refuse the model."""
    # never str() of a ModelProto: that renders every weight as text (84 s for vgg19's 548 MB)
    what = "the upload" if isinstance(source, bytes) else "the model" if isinstance(source, ModelProto) else str(source)
    if isinstance(source, ModelProto):
        model, base = source, None
    else:
        try:
            raw = source if isinstance(source, bytes) else Path(source).read_bytes()
        except OSError as exc:
            raise FlowTrainError(f"{what} cannot be read: {exc.strerror or exc}") from None
        count = count_nodes(raw, MAX_ONNX_NODES)
        if count is not None and count > MAX_ONNX_NODES:
            raise SpecError([_too_many(count)])
        try:
            model = onnx.load_model_from_string(raw)
        except Exception as exc:  # noqa: BLE001  (protobuf's DecodeError: not an ONNX file)
            raise FlowTrainError(f"{what} is not an ONNX model ({type(exc).__name__}: {exc})") from None
        base = None if isinstance(source, bytes) else Path(source).absolute().parent
    if not model.graph.node:
        raise FlowTrainError("the ONNX model has no nodes")
    problems = _structure_problems(model)
    problems += [p for label, tensor in _tensors(model.graph, "onnx")
                 if external_data_helper.uses_external_data(tensor)
                 for p in _read_external(label, tensor, base)]
    if problems:
        raise SpecError(problems)
    return model


def _structure_problems(model: ModelProto) -> list[Problem]:
    if len(model.graph.node) > MAX_ONNX_NODES:
        return [_too_many(len(model.graph.node))]
    problems = []
    for node in model.graph.node:
        graphs = [a.name for a in node.attribute if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)]
        if graphs:
            name = node.name or (node.output[0] if node.output else "?")
            problems.append(Problem(f"onnx.nodes[{name}]", f"{node.op_type}: control flow (a subgraph in "
                                    f"{', '.join(graphs)}) cannot be imported",
                                    received=node.op_type, expected="a graph without Loop, If or Scan",
                                    fix="export the model with its control flow unrolled or removed"))
    return problems


def _tensors(graph: GraphProto, prefix: str) -> Iterator[tuple[str, TensorProto]]:
    """Every tensor of a graph with the location a problem names: initialisers, sparse ones, attributes."""
    for t in graph.initializer:
        yield f"{prefix}.initializers[{t.name}]", t
    for s in graph.sparse_initializer:
        yield f"{prefix}.initializers[{s.values.name}]", s.values
        yield f"{prefix}.initializers[{s.values.name}].indices", s.indices
    for node in graph.node:
        where = f"{prefix}.nodes[{node.name or (node.output[0] if node.output else '?')}]"
        for a in node.attribute:
            if a.HasField("t"):
                yield f"{where}.{a.name}", a.t
            for t in a.tensors:
                yield f"{where}.{a.name}", t
            if a.HasField("sparse_tensor"):
                yield f"{where}.{a.name}", a.sparse_tensor.values
            for g in [a.g] if a.HasField("g") else list(a.graphs):
                yield from _tensors(g, f"{where}.{a.name}")


def _read_external(label: str, tensor: TensorProto, base: Path | None) -> list[Problem]:
    """Read one tensor's external data into it, or the problem saying why not."""
    try:
        info = external_data_helper.ExternalDataInfo(tensor)
    except ValueError as exc:  # a negative or non-numeric offset or length
        return [Problem(label, "its external data entry is malformed", received=str(exc)[:300],
                        expected="a location with non-negative integer offset and length")]
    received = f"location {info.location!r}"
    if base is None:
        return [Problem(label, "its data is kept in an external file, and an uploaded model is one file",
                        received=received, expected="the weights inside the .onnx file",
                        fix="save the model with its weights inside (onnx.save_model(model, path, "
                            "save_as_external_data=False), for models under 2 GB), or import it with "
                            "`python -m flowtrain import-onnx MODEL.onnx` beside its data file")]
    rel = PurePosixPath(info.location)
    where = f"a file in the model's folder {base}, named relative to it (no absolute path, no '..', no links)"
    if not info.location or "\\" in info.location or "\0" in info.location or rel.is_absolute() \
            or ".." in rel.parts:
        return [Problem(label, "its external data location leaves the model's folder", received=received,
                        expected=where)]
    expected_bytes = _declared_bytes(tensor)
    if info.length is not None and expected_bytes is not None and int(info.length) != expected_bytes:
        return [Problem(label, "its external data length does not match its shape", received=f"length {info.length}",
                        expected=f"{expected_bytes} bytes for dims {list(tensor.dims)}")]
    link = _link_below(base, rel)
    if link is not None:
        return [Problem(label, "its external data is reached through a symbolic link", received=f"{received} "
                        f"({link} is a link)", expected=where)]
    try:
        external_data_helper.load_external_data_for_tensor(tensor, os.fspath(base))
    except (OSError, ValueError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:  # type: ignore[attr-defined]
        return [Problem(label, "its external data cannot be read", received=f"{received}: {exc}", expected=where)]
    if expected_bytes is not None and len(tensor.raw_data) != expected_bytes:
        got = len(tensor.raw_data)
        tensor.ClearField("raw_data")
        return [Problem(label, "its external data does not match its shape", received=f"{got} bytes",
                        expected=f"{expected_bytes} bytes for dims {list(tensor.dims)}")]
    return []


def _declared_bytes(tensor: TensorProto) -> int | None:
    """The bytes a tensor's dims and type need; None for strings and packed 4-bit types."""
    if tensor.data_type in _UNSIZED:
        return None
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None
    return math.prod(int(d) for d in tensor.dims) * itemsize


def _link_below(base: Path, rel: PurePosixPath) -> Path | None:
    """The first symbolic link on the way from ``base`` to ``base/rel``, if any."""
    here = base
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            return here
    return None
