"""The op catalogue's machinery: parameter declarations, the ``Op`` base class and the registry.

An op declares, in plain Python and without any framework:
- its parameters (type, default, range, help text the editor shows),
- its inputs (how many; whether their order matters — Concat — or not — Add),
- a pure shape-inference function,
- its weights (:class:`Weight`: torch's name and shape, and the initialiser every framework's
  program gives it), from which its parameter count follows,
- its multiply-accumulate (MAC) count,
- whether it reads axis 0 of an image or signal as channels (Keras runs those ops channels-last).

Shapes never include the batch axis and follow one logical layout: images are
``(C, H, W)``, 1-d signals ``(C, L)``, sequences ``(T, F)``, vectors ``(F,)``. The
mappers translate that layout to each framework's own (Keras runs channels-last).

MACs count the multiply-accumulates of matrix products (convolutions, linear layers,
attention, recurrent cells), which is what torchvision's published GFLOPS figures
count; element-wise ops (activations, normalisation, pooling) are reported as 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Dtype = Literal["float32", "int64"]


@dataclass(frozen=True)
class Tensor:
    """The type of a value flowing along an edge: its shape without the batch axis and its dtype."""

    shape: tuple[int, ...]
    dtype: Dtype = "float32"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        dims = "×".join(str(d) for d in self.shape) or "scalar"
        return dims if self.dtype == "float32" else f"{dims} {self.dtype}"


Init = Literal["uniform", "normal", "ones", "zeros"]


@dataclass(frozen=True)
class Weight:
    """One weight of an op: torch's shape for the logical (channels-first) model and its initialiser.

    The name (the key of :meth:`Op.weights`) is torch's state-dict name, so these are the
    *canonical* weights every framework's program loads and saves (:mod:`core.weights`).
    ``init`` is how every generated program initialises it: ``uniform`` U(±1/√fan_in) (linear,
    convolution, recurrent and attention layers), ``normal`` N(0, std) (embeddings), ``ones`` and
    ``zeros`` (norm scales and shifts, running statistics). A ``normal`` weight whose std is scaled
    to its fan-in (He's N(0, 2/fan_in), ``init: he`` on a convolution) declares that ``fan_in`` too.
    ``buffer`` marks a statistic that training updates without a gradient (BatchNorm's running mean
    and variance); it does not count as a parameter.
    """

    shape: tuple[int, ...]
    init: Init
    fan_in: int = 0
    std: float = 1.0
    buffer: bool = False

    def __post_init__(self) -> None:
        if self.init == "uniform" and self.fan_in < 1:  # a programming error in an op declaration
            raise ValueError(f"a uniform weight {self.shape} needs its fan_in")

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def uniform(*shape: int, fan_in: int) -> Weight:
    """A weight initialised U(±1/√fan_in) (torch's rule for linear and convolution layers)."""
    return Weight(tuple(shape), "uniform", fan_in=fan_in)


def linear_weights(out: int, fin: int, bias: bool, prefix: str = "") -> dict[str, Weight]:
    """``<prefix>weight`` (out, in) and ``<prefix>bias`` (out,) of a linear layer, U(±1/√in)."""
    weights = {f"{prefix}weight": uniform(out, fin, fan_in=fin)}
    if bias:
        weights[f"{prefix}bias"] = uniform(out, fan_in=fin)
    return weights


def affine_weights(width: int, prefix: str = "") -> dict[str, Weight]:
    """A norm layer's learned scale (ones) and shift (zeros)."""
    return {f"{prefix}weight": Weight((width,), "ones"), f"{prefix}bias": Weight((width,), "zeros")}


class ShapeError(Exception):
    """Raised by shape inference: the inputs an op received cannot work with its parameters."""

    def __init__(self, message: str, expected: str | None = None, fix: str | None = None,
                 field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.fix = fix
        self.field = field


class ParamError(ValueError):
    def __init__(self, message: str, expected: str) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected


_REQUIRED = object()

ParamKind = Literal["int", "float", "bool", "choice", "int_pair", "padding", "shape", "ints", "node"]

NODE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # core.spec's ID_PATTERN, for ``node`` params


@dataclass(frozen=True)
class Param:
    """One declared parameter of an op.

    ``kind`` decides how a value is checked and normalised:
    ``int``/``float`` (with ``minimum``/``maximum``), ``bool``, ``choice`` (one of
    ``choices``), ``int_pair`` (an int or ``[h, w]``, normalised to a pair),
    ``padding`` (like ``int_pair`` or ``"same"``/``"valid"``), ``shape`` (a list of
    positive ints, ``-1`` allowed once when ``allow_infer``), ``ints`` (a list of ints) and ``node``
    (the id of another node of the graph; the validator checks what it names).
    """

    name: str
    kind: ParamKind
    default: Any = _REQUIRED
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()
    optional: bool = False  # None is an accepted value
    allow_infer: bool = False
    # What the editor puts into a new node for a required parameter (the op's own typical value),
    # so that a node dropped from the palette is valid at once. Not a default: specs must say it.
    example: Any = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def describe(self) -> str:
        """Human-readable expectation, used in error messages and the editor's help."""
        rng = ""
        if self.minimum is not None and self.maximum is not None:
            rng = f" in [{_num(self.minimum)}, {_num(self.maximum)}]"
        elif self.minimum is not None:
            rng = f" ≥ {_num(self.minimum)}"
        elif self.maximum is not None:
            rng = f" ≤ {_num(self.maximum)}"
        text = {
            "int": f"an integer{rng}",
            "float": f"a number{rng}",
            "bool": "true or false",
            "choice": "one of " + ", ".join(repr(c) for c in self.choices),
            "int_pair": f"an integer{rng} or a pair [h, w] of them",
            "padding": f"an integer{rng}, a pair [h, w], 'same' or 'valid'",
            "shape": "a list of positive integers" + (" (one -1 may stand for the rest)" if self.allow_infer else ""),
            "ints": "a list of integers",
            "node": "the id of a node of the graph",
        }[self.kind]
        return text + (" or null" if self.optional else "")

    def check(self, value: Any) -> Any:
        """Return the normalised value or raise :class:`ParamError`."""
        if value is None:
            if self.optional:
                return None
            raise ParamError("must not be null", self.describe())
        if self.kind == "int":
            return self._ranged(_as_int(value, self))
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParamError("is not a finite number", self.describe())
            return self._ranged(float(value))
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ParamError("is not a boolean", self.describe())
            return value
        if self.kind == "choice":
            if not isinstance(value, (str, int, float)) or isinstance(value, bool) or value not in self.choices:
                raise ParamError("is not one of the allowed values", self.describe())
            return value
        if self.kind in ("int_pair", "padding"):
            if self.kind == "padding" and isinstance(value, str):
                if value in ("same", "valid"):
                    return value
                raise ParamError("is not a known padding mode", self.describe())
            if isinstance(value, (list, tuple)):
                if len(value) != 2:
                    raise ParamError(f"has {len(value)} entries", self.describe())
                return tuple(self._ranged(_as_int(v, self)) for v in value)
            v = self._ranged(_as_int(value, self))
            return (v, v)
        if self.kind == "node":
            if not isinstance(value, str) or not NODE_ID.fullmatch(value):
                raise ParamError("is not a node id", self.describe())
            return value
        if self.kind in ("shape", "ints"):
            if not isinstance(value, (list, tuple)) or len(value) > 8:
                raise ParamError("is not a list of at most 8 integers", self.describe())
            items = tuple(_as_int(v, self) for v in value)
            if self.kind == "shape":
                inferred = sum(1 for v in items if v == -1)
                bad = [v for v in items if v < 1 and not (v == -1 and self.allow_infer)]
                if bad or inferred > (1 if self.allow_infer else 0):
                    raise ParamError("has entries that are not positive sizes", self.describe())
                if any(v > 10**7 for v in items):
                    raise ParamError("has a dimension above 10,000,000", self.describe())
            return items
        raise AssertionError(f"unknown param kind {self.kind}")  # a programming error, not user input

    def _ranged(self, v: float) -> Any:
        if (self.minimum is not None and v < self.minimum) or (self.maximum is not None and v > self.maximum):
            raise ParamError("is out of range", self.describe())
        return v

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "required": self.required,
            "default": None if self.required else _jsonable(self.default),
            "help": self.help,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "choices": list(self.choices),
            "optional": self.optional,
        }


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _as_int(value: Any, param: Param) -> int:
    if isinstance(value, bool):
        raise ParamError("is a boolean, not an integer", param.describe())
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if not isinstance(value, int):
        raise ParamError("is not an integer", param.describe())
    return value


@dataclass(frozen=True)
class OnnxAttr:
    """An ONNX attribute that is one of the op's parameters, with ONNX's default for a model that
    leaves it out (which need not be the op's: HardSigmoid's alpha is 0.2 in ONNX, 1/6 here)."""

    param: str
    default: float | int | str


@dataclass(frozen=True)
class OnnxOp:
    """The op *is* one ONNX operator of the default domain at the exported opset: ``op_type`` on the
    op's inputs, with ``attributes`` (ONNX name → :class:`OnnxAttr`) its parameters. One generic
    exporter (:mod:`core.onnx_export.one_to_one`) and importer (:mod:`core.onnx_import.one_to_one`)
    serve every op that declares one; an ONNX node with an attribute not declared here is refused."""

    op_type: str
    attributes: Mapping[str, OnnxAttr] = field(default_factory=dict)


class Op:
    """Base class of every op. Subclasses are registered with :func:`register_op`."""

    name: ClassVar[str]
    family: ClassVar[str]
    help: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    min_inputs: ClassVar[int] = 1
    max_inputs: ClassVar[int | None] = 1
    ordered_inputs: ClassVar[bool] = False  # True when the port order changes the result (Concat)
    input_dtype: ClassVar[Dtype | None] = "float32"  # None: any dtype
    # True when axis 0 of an image (C, H, W) or signal (C, L) input is read as its channels
    # (convolutions, pooling, batch norm); the Keras mapper runs such ops channels-last.
    reads_channels: ClassVar[bool] = False
    # Set when the op is exactly one ONNX operator (its export and import then need no code).
    onnx: ClassVar[OnnxOp | None] = None

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        raise NotImplementedError

    @classmethod
    def equal_axes(cls, p: dict[str, Any], rank: int) -> tuple[int, ...]:
        """The axes on which every input must have the same size (what :meth:`infer` checks). A block's
        class learns from them that an input port's size is another input's (a residual ``Add``)."""
        return ()

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        """Torch's state-dict names of the op's weights, in torch's order (empty for weight-free ops)."""
        return {}

    @classmethod
    def count_params(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        """Trained parameters: the sizes of :meth:`weights` without buffers."""
        return sum(w.numel for w in cls.weights(inputs, p).values() if not w.buffer)

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        return 0

    @classmethod
    def param(cls, name: str) -> Param:
        for prm in cls.params:
            if prm.name == name:
                return prm
        raise KeyError(f"{cls.name} has no parameter {name!r}")

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {
            "op": cls.name,
            "family": cls.family,
            "help": cls.help,
            "inputs": {"min": cls.min_inputs, "max": cls.max_inputs, "ordered": cls.ordered_inputs},
            "params": [prm.to_dict() for prm in cls.params],
        }


@dataclass
class OpRegistry:
    ops: dict[str, type[Op]] = field(default_factory=dict)

    def register(self, cls: type[Op]) -> type[Op]:
        if cls.name in self.ops:
            raise ValueError(f"op {cls.name!r} is already registered (by {self.ops[cls.name].__qualname__})")
        names = [prm.name for prm in cls.params]
        if len(set(names)) != len(names):
            raise ValueError(f"op {cls.name!r} declares a parameter twice: {names}")
        self.ops[cls.name] = cls
        return cls

    def get(self, name: str) -> type[Op]:
        return self.ops[name]

    def __contains__(self, name: object) -> bool:
        return name in self.ops

    def names(self) -> list[str]:
        return sorted(self.ops)

    def families(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, cls in self.ops.items():
            out.setdefault(cls.family, []).append(name)
        return {k: sorted(v) for k, v in sorted(out.items())}


REGISTRY = OpRegistry()


def register_op(cls: type[Op]) -> type[Op]:
    """Class decorator: add ``cls`` to the catalogue; a second op with the same name raises."""
    return REGISTRY.register(cls)


# --------------------------------------------------------------------------- shape helpers


def expect_rank(t: Tensor, ranks: Sequence[int], what: str) -> None:
    if len(t.shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ShapeError(f"input has {len(t.shape)} dimension(s) ({t})", expected=f"{want} dimension(s): {what}",
                         fix="check the layers before this one (a Flatten or Reshape may be missing or misplaced)")


def conv_out(size: int, k: int, s: int, pad: int, d: int = 1, ceil: bool = False) -> int:
    eff = d * (k - 1) + 1
    num = size + 2 * pad - eff
    if num < 0:
        return 0
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= size + pad:
        out -= 1  # torch's rule: the last window must start inside the input or left padding
    return out


def same_out(size: int, s: int) -> int:
    return -(-size // s)


def bool_param(name: str, default: bool, help: str) -> Param:
    return Param(name, "bool", default, help)
