"""Fully-connected layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, Weight, bool_param, linear_weights, register_op


@register_op
class Linear(Op):
    name = "Linear"
    family = "dense"
    help = "y = x·Wᵀ + b over the last axis. in_features is taken from the input."
    params = (
        Param("out_features", "int", example=64, minimum=1, maximum=1_000_000, help="Number of output features."),
        bool_param("bias", True, "Add a learned bias."),
        Param("tie_to", "node", None, optional=True,
              help="Share the weight of this Embedding node (a language model's head tied to its token "
                   "embedding): out_features must be its vocabulary and the input width its embedding_dim. "
                   "The shared weight is counted once."),
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
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        weights = linear_weights(p["out_features"], inputs[0].shape[-1], p["bias"])
        if p.get("tie_to") is not None:
            del weights["weight"]  # the Embedding's (V, E) table is the weight: it is declared (and counted) there
        return weights

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        return inputs[0].numel * p["out_features"]
