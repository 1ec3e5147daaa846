"""A registry of one function per op of the catalogue: the framework converters (core/mapping/) and
the ONNX exporters (core/onnx_export/) are each one such registry, filled by a decorator.

A second registration for an op raises, naming the function that has it; so does one for an op
the catalogue does not know (a typo must not register a converter nobody calls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from core.ops.registry import REGISTRY as OPS

F = TypeVar("F", bound=Callable[..., object])


class PerOpRegistry(Generic[F]):
    """``owner`` names the registry in messages ("torch", "onnx"), ``kind`` what it holds ("a converter")."""

    def __init__(self, owner: str, kind: str) -> None:
        self.owner = owner
        self.kind = kind
        self.functions: dict[str, F] = {}

    def register(self, *ops: str) -> Callable[[F], F]:
        def decorate(fn: F) -> F:
            for op in ops:
                if op not in OPS:
                    raise ValueError(f"{self.owner}: cannot register {self.kind} for unknown op {op!r}")
                if op in self.functions:
                    held = self.functions[op]
                    raise ValueError(f"{self.owner}: op {op!r} already has {self.kind} "
                                     f"({held.__module__}.{held.__qualname__})")
                self.functions[op] = fn
            return fn

        return decorate

    def supports(self, op: str) -> bool:
        return op in self.functions
