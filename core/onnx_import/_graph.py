"""The machinery of ONNX import: the registry of per-ONNX-op importers, the values flowing between
them, and the context one importer sees.

An importer (``@imports("Conv")``) turns one ONNX node into catalogue nodes through
:meth:`NodeContext.add` (which checks the parameters against the op's declaration, infers the
shape with the catalogue's own shape inference and checks the weights against the op's declared
ones), or returns one of its inputs (Identity, a Dropout-free pass-through). Constants — the
initialisers and everything computed from constants only (shape subgraphs, weight reshapes,
``ConstantOfShape`` placeholders) — are folded before the importers run and reach them as numpy
arrays (:meth:`NodeContext.const`).

An importer that meets a configuration the catalogue cannot express raises :class:`Refused`
with what it received and what would work; the driver (:mod:`core.onnx_import`) turns it into a
:class:`~core.errors.Problem` naming the ONNX op type, node name and opset.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import NodeProto, helper

from core.ops import REGISTRY as OPS
from core.ops import ShapeError, Tensor
from core.ops.registry import ParamError


@dataclass(frozen=True)
class Value:
    """A tensor of the imported graph: the catalogue node that yields it and its shape without the batch axis."""

    node: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class SplitChannels:
    """A channel axis seen as (groups, C/groups) by a Reshape, not yet joined back (ShuffleNet's
    Reshape → Transpose → Reshape); ``swapped`` once the Transpose exchanged the two group axes."""

    source: Value
    groups: int
    swapped: bool = False


@dataclass(frozen=True)
class ZeroPadded:
    """A tensor zero-padded by an ONNX Pad, not yet consumed: the convolution (or padding-counting
    average pool) that reads it takes the padding as its own (``pads``: begins then ends, spatial axes)."""

    source: Value
    pads: tuple[int, ...]


@dataclass(frozen=True)
class Tokens:
    """A patch convolution's output (E, H', W') reshaped to (E, H'·W') and not yet consumed (ViT's patch
    embedding is Conv → Reshape → Transpose [0, 2, 1]): the Transpose makes the convolution a PatchEmbed;
    any other reader gets the Reshape it is (:meth:`NodeContext.value`)."""

    source: Value
    hint: str


@dataclass(frozen=True)
class Cropped:
    """A feature map sliced on its spatial axes by an ONNX Slice, not yet consumed: a Concat along the
    channels that reads it makes a CropConcat (U-Net's cropped skip connection)."""

    source: Value
    box: tuple[tuple[int, int], ...]  # (start, stop) per spatial axis


Imported = Value | SplitChannels | ZeroPadded | Tokens | Cropped


class Refused(Exception):
    """An importer cannot express this node's configuration in the catalogue."""

    def __init__(self, message: str, expected: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.fix = fix


Importer = Callable[["NodeContext"], "Imported | None"]


class ImporterRegistry:
    """One importer per ONNX op type; a second registration for a type raises, naming the holder."""

    def __init__(self) -> None:
        self.functions: dict[str, Importer] = {}

    def register(self, *op_types: str) -> Callable[[Importer], Importer]:
        def decorate(fn: Importer) -> Importer:
            for op_type in op_types:
                if op_type in self.functions:
                    held = self.functions[op_type]
                    raise ValueError(f"ONNX op {op_type!r} already has an importer "
                                     f"({held.__module__}.{held.__qualname__})")
                self.functions[op_type] = fn
            return fn

        return decorate

    def supports(self, op_type: str) -> bool:
        return op_type in self.functions

    def names(self) -> list[str]:
        return sorted(self.functions)


IMPORTERS = ImporterRegistry()
imports = IMPORTERS.register

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class GraphBuilder:
    """The spec graph under construction: catalogue nodes, edges and canonical weights."""

    batch: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    ops: dict[str, str] = field(default_factory=dict)  # node id → op
    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id → checked params
    inputs: dict[str, list[Value]] = field(default_factory=dict)  # node id → its input values

    def node_id(self, hint: str) -> str:
        """A node id from an ONNX name (characters the spec refuses become '_'), unique in the graph."""
        base = _UNSAFE.sub("_", hint).strip("_.-")[:56] or "node"
        if not re.match(r"[A-Za-z0-9_]", base):
            base = "n" + base
        candidate, i = base, 1
        while candidate in self.ops:
            i += 1
            candidate = f"{base}_{i}"
        return candidate

    def add(self, op: str, params: dict[str, Any], inputs: Sequence[Value], hint: str,
            weights: dict[str, np.ndarray] | None = None) -> Value:
        """Add one catalogue node; its shape comes from the op's own inference (a ShapeError is a refusal)."""
        cls = OPS.get(op)
        checked = {}
        for prm in cls.params:
            value = params.get(prm.name, None if prm.required else prm.default)
            try:
                checked[prm.name] = prm.check(value)
            except ParamError as err:
                raise Refused(f"{op} parameter {prm.name}={value!r} {err.message}", expected=err.expected) from None
        tensors = [Tensor(v.shape) for v in inputs]
        try:
            out = cls.infer(tensors, checked)
        except ShapeError as err:
            raise Refused(f"as {op}: {err.message}", expected=err.expected, fix=err.fix) from None
        declared = {name: w.shape for name, w in cls.weights(tensors, checked).items()}
        given = {name: tuple(a.shape) for name, a in (weights or {}).items()}
        if declared != given:
            raise Refused(f"its weights {given} do not fit {op}'s {declared}")
        node_id = self.node_id(hint)
        self.ops[node_id] = op
        self.params[node_id] = checked
        self.inputs[node_id] = list(inputs)
        self.nodes.append({"id": node_id, "op": op, "params": {k: v for k, v in params.items() if v is not None}})
        for port, v in enumerate(inputs):
            edge: dict[str, Any] = {"source": v.node, "target": node_id}
            if cls.ordered_inputs:
                edge["port"] = port
            self.edges.append(edge)
        for name, array in (weights or {}).items():
            self.weights[f"{node_id}/{name}"] = np.ascontiguousarray(array, dtype=np.float32)
        return Value(node_id, tuple(out.shape))


    def remove(self, node_id: str) -> tuple[list[Value], dict[str, np.ndarray]]:
        """Take out a node that nothing reads yet (to be replaced by one op that does its work and
        more); returns its inputs and weights."""
        if any(e["source"] == node_id for e in self.edges):
            raise ValueError(f"node {node_id} is read by another node")  # a programming error in an importer
        self.nodes = [n for n in self.nodes if n["id"] != node_id]
        self.edges = [e for e in self.edges if e["target"] != node_id]
        prefix = f"{node_id}/"
        weights = {k[len(prefix):]: self.weights.pop(k) for k in [k for k in self.weights if k.startswith(prefix)]}
        del self.ops[node_id], self.params[node_id]
        return self.inputs.pop(node_id), weights


@dataclass
class NodeContext:
    """What one importer sees: the ONNX node, its inputs (values or folded constants) and the builder."""

    node: NodeProto
    opset: int
    builder: GraphBuilder
    inputs: list[Imported | np.ndarray | None]  # None: an omitted optional input
    single_consumer: list[bool]  # per input: only this node reads it (a fold may change its producer)

    @property
    def name(self) -> str:
        return self.node.name or (self.node.output[0] if self.node.output else self.node.op_type)

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's value; a float is ONNX's float32 written as its shortest decimal (1e-4, not
        9.999999747378752e-05), which is the same float32 in every generated program."""
        for a in self.node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                if isinstance(value, float):
                    return float(str(np.float32(value)))
                return value.decode() if isinstance(value, bytes) else value
        return default

    def value(self, i: int) -> Value:
        """Input ``i`` as a tensor computed by the network (not a constant, not a split channel axis)."""
        got = self.inputs[i] if i < len(self.inputs) else None
        if isinstance(got, Value):
            return got
        if isinstance(got, Tokens):  # read as the Reshape it is
            return self.builder.add("Reshape", {"shape": list(_token_shape(got))}, [got.source], got.hint)
        what = "a constant" if isinstance(got, np.ndarray) else "missing" if got is None else \
            "zero-padded by a Pad (only a convolution or an average pool counting padding can take it)" \
            if isinstance(got, ZeroPadded) else \
            "a feature map cropped by a Slice (only a Concat of cropped maps along the channels is supported)" \
            if isinstance(got, Cropped) else \
            "a channel axis split into groups (only a Transpose of the groups and a Reshape back are supported)"
        raise Refused(f"input {i} is {what}", expected="a tensor computed from the model's input")

    def padded(self, i: int) -> tuple[Value, list[int] | None]:
        """Input ``i`` and the zero padding of a Pad before it (None without one)."""
        got = self.inputs[i] if i < len(self.inputs) else None
        if isinstance(got, ZeroPadded):
            return got.source, list(got.pads)
        return self.value(i), None

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i`` when it is a constant (initialiser or folded), else None."""
        got = self.inputs[i] if i < len(self.inputs) else None
        return got if isinstance(got, np.ndarray) else None

    def weight(self, i: int, what: str) -> np.ndarray:
        array = self.const(i)
        if array is None:
            raise Refused(f"its {what} (input {i}) is computed by the network, not a constant",
                          expected=f"a constant {what} (an initialiser)")
        return array.astype(np.float32)

    def add(self, op: str, params: dict[str, Any], inputs: Sequence[Value],
            weights: dict[str, np.ndarray] | None = None, suffix: str = "") -> Value:
        return self.builder.add(op, params, inputs, self.name + suffix, weights)


def _token_shape(tokens: Tokens) -> tuple[int, ...]:
    e, h, w = tokens.source.shape
    return (e, h * w)
