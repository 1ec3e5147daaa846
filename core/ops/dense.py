"""Fully-connected layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, bool_param, register_op


@register_op
class Linear(Op):
    name = "Linear"
    family = "dense"
    help = "y = x·Wᵀ + b over the last axis. in_features is taken from the input."
    params = (
        Param("out_features", "int", minimum=1, maximum=1_000_000, help="Number of output features."),
        bool_param("bias", True, "Add a learned bias."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        if not x.shape:
            raise ShapeError("input is a scalar", expected="at least one axis")
        if len(x.shape) > 2:
            raise ShapeError(f"input has {len(x.shape)} axes ({x})", expected="features (F) or a sequence (T, F)",
                             fix="insert a Flatten (or a GlobalAvgPool) before this Linear")
        return Tensor(x.shape[:-1] + (p["out_features"],))

    @classmethod
    def count_params(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        fin = inputs[0].shape[-1]
        return fin * p["out_features"] + (p["out_features"] if p["bias"] else 0)

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        return inputs[0].numel * p["out_features"]
