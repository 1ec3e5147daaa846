"""Ops that only rearrange elements."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, register_op


@register_op
class Flatten(Op):
    name = "Flatten"
    family = "shape"
    help = "Flattens one sample into a vector: (C, H, W) → (C·H·W), in channel-major order."

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        return Tensor((inputs[0].numel,))


@register_op
class Reshape(Op):
    name = "Reshape"
    family = "shape"
    help = "Gives one sample a new shape with the same number of elements; one -1 stands for the rest."
    params = (Param("shape", "shape", example=[-1], allow_infer=True, help="Target shape without the batch axis, e.g. [16, 7, 7]."),)

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        target = list(p["shape"])
        if not target:
            raise ShapeError("the target shape is empty", expected="at least one axis", field="shape")
        known = math.prod(v for v in target if v != -1)
        if -1 in target:
            if x.numel % known:
                raise ShapeError(f"{x.numel} elements cannot fill shape {target}",
                                 expected=f"sizes whose product divides {x.numel}", field="shape")
            target[target.index(-1)] = x.numel // known
        elif known != x.numel:
            raise ShapeError(f"shape {target} holds {known} elements but the input ({x}) has {x.numel}",
                             expected=f"sizes whose product is {x.numel}", field="shape")
        return Tensor(tuple(target), x.dtype)
