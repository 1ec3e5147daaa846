"""What a framework mapper produces, and the registry of per-op converters.

A mapper turns the validated graph (:class:`core.validate.Analysis`) into a
:class:`MappedModel`: one :class:`MappedLayer` per node with a constructor expression,
a forward expression and the bindings that carry canonical weights into the
framework's own parameters. Code fragments are built **only** from generated
identifiers and from :func:`literal` (typed values rendered with ``repr``), never from
user text, so nothing a user types can become code.

Canonical weights are the torch layout of the logical (channels-first) model, keyed
``"<node id>/<name>"`` (e.g. ``conv1/weight`` of shape (O, I/groups, kh, kw)); see
:mod:`core.weights`. Every framework's generated ``model.py`` can load them, which
is how the equivalence check gives all frameworks the same weights.
"""

from __future__ import annotations

import importlib
import keyword
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.errors import Problem
from core.frameworks import FRAMEWORKS
from core.mapping.symbols import Sym, SymFloat, SymStr
from core.ops import REGISTRY as OPS
from core.ops.per_op import PerOpRegistry
from core.validate import Analysis, NodeInfo


def literal(value: Any) -> str:
    """Render a typed parameter value as a Python literal (the only way values enter code).

    A symbol (:mod:`core.mapping.symbols`: a block class's constructor argument) is written as a
    marker that becomes the argument's name."""
    if isinstance(value, (Sym, SymFloat, SymStr)):
        return value.code()
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot render non-finite number {value!r} as a literal")
        return repr(float(value))
    if isinstance(value, str):
        return repr(value)  # escapes quotes, backslashes, newlines and U+2028/2029
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(str(k))}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as a literal")


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch: "$" would let a trailing newline in


def ident(name: str) -> str:
    """Check that a generated name is a plain Python identifier (defence in depth)."""
    if not _IDENT.fullmatch(name) or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a safe generated identifier")
    return name


def call(func: str, *args: str, **kwargs: Any) -> str:
    """``func(arg, …, key=literal, …)``: ``func`` and positional ``args`` must be code built by the mapper."""
    parts = list(args) + [f"{ident(k)}={literal(v)}" for k, v in kwargs.items()]
    return f"{func}({', '.join(parts)})"


def cropped(name: str, box: tuple[tuple[int, int], ...] | None, channels_last: bool = False) -> str:
    """``name`` (code built by the mapper) sliced to ``box``, (start, stop) integers per spatial axis of
    the batched tensor, channels first unless ``channels_last``: CropConcat's crop in every framework."""
    if box is None:
        return name
    spatial = ", ".join(f"{int(a)}:{int(b)}" for a, b in box)
    return f"{name}[:, {spatial}, :]" if channels_last else f"{name}[:, :, {spatial}]"


@dataclass(frozen=True)
class WeightBinding:
    """Canonical weight ``<node>/<canonical>`` goes to the framework parameter ``target`` after ``transform``.

    ``transform`` names one of the fixed conversion functions defined in each framework's
    ``model.py`` template (``identity``, ``transpose``, ``oihw_to_hwio`` …).
    """

    canonical: str
    target: str
    transform: str = "identity"


@dataclass(frozen=True)
class MappedLayer:
    node_id: str
    op: str
    var: str  # attribute name of the layer object (generated)
    out: str  # name of the tensor it produces in forward (generated)
    ctor: str | None  # constructor expression, None for stateless ops done in forward
    forward: str  # expression computing ``out`` from the input tensor names
    comment: str  # points back to the node: "node conv1 (Conv2d) -> 32x26x26"
    weights: tuple[WeightBinding, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MappedModel:
    framework: str
    class_name: str
    layers: tuple[MappedLayer, ...]
    input_name: str
    output_name: str
    input_layout: str  # layout the model takes: "NCHW", "NHWC", "NCL", "NLC", "NTF", "NT", "NF"
    output_layout: str
    imports: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConvertContext:
    """What a converter sees: the node, its inputs' mapped layers and the whole analysis."""

    analysis: Analysis
    node: NodeInfo
    inputs: list[MappedLayer]
    var: str
    out: str
    # The layers mapped so far, by node id (top-level nodes; a use by its id): a head tied to an
    # Embedding (``tie_to``) reads that layer's table.
    mapped: dict[str, MappedLayer] = field(default_factory=dict)

    def tied(self) -> MappedLayer | None:
        """The Embedding layer whose table this node shares (``tie_to``), or None."""
        target = self.params.get("tie_to")
        return None if target is None else self.mapped[target]

    @property
    def params(self) -> dict[str, Any]:
        return self.node.params

    @property
    def in_shapes(self) -> list[tuple[int, ...]]:
        return [self.analysis.nodes[s].output.shape for s in self.node.inputs]

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.node.output.shape

    @property
    def in_names(self) -> list[str]:
        return [layer.out for layer in self.inputs]

    def comment(self) -> str:
        shape = "x".join(str(d) for d in self.out_shape)
        return f"node {self.node.id} ({self.node.op}) -> {shape}"


Converter = Callable[[ConvertContext], MappedLayer]


class Unsupported(Exception):
    """The mapper cannot express the graph: an op without a converter, or no Input/Output node."""


class ConverterRegistry(PerOpRegistry[Converter]):
    """One converter per op for one framework; a second registration for an op raises.

    A converter expresses every valid configuration of its op: what a framework cannot do
    directly (an uneven adaptive pool, a strided 'same' convolution) it writes out explicitly,
    so there is no per-configuration refusal — an op is either supported or it is not.
    """

    def __init__(self, framework: str) -> None:
        super().__init__(framework, "a converter")
        self.framework = framework

    @property
    def converters(self) -> dict[str, Converter]:
        return self.functions

    def get(self, op: str, node_id: str) -> Converter:
        try:
            return self.functions[op]
        except KeyError:
            raise Unsupported(f"{self.framework} has no converter for op {op} (node {node_id})") from None


_REGISTRIES: dict[str, ConverterRegistry] = {fw: ConverterRegistry(fw) for fw in FRAMEWORKS}


def converters(framework: str) -> ConverterRegistry:
    """The framework's registry, with its converter modules imported (they register on import)."""
    if framework not in _REGISTRIES:
        raise ValueError(f"unknown framework {framework!r}; expected one of {', '.join(FRAMEWORKS)}")
    importlib.import_module(f"core.mapping.{framework}")  # imports no framework, only the converters
    return _REGISTRIES[framework]


def support_table() -> dict[str, dict[str, bool]]:
    regs = {fw: converters(fw) for fw in FRAMEWORKS}
    return {op: {fw: regs[fw].supports(op) for fw in FRAMEWORKS} for op in OPS.names()}


def unsupported_problems(analysis: Analysis, framework: str) -> list[Problem]:
    """Every node whose op the framework has no converter for, naming the op, the node and the
    frameworks that have one."""
    reg = converters(framework)
    problems = []
    for node in analysis.nodes.values():
        if reg.supports(node.op):
            continue
        others = [fw for fw in FRAMEWORKS if fw != framework and converters(fw).supports(node.op)]
        problems.append(Problem(
            f"model.nodes[{node.id}]", f"cannot be generated for {framework}: {framework} has no converter for "
            f"{node.op}", node=node.id, received=node.op, expected=f"an op {framework} supports",
            fix=(f"choose {' or '.join(others)} for this graph" if others else
                 "no framework supports this op; replace the node")))
    return problems
