"""Regularisation that is active only while training."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, Tensor, register_op


@register_op
class Dropout(Op):
    name = "Dropout"
    family = "dropout"
    help = "Zeroes each element with probability p while training (scaled by 1/(1-p)); identity in eval."
    params = (Param("p", "float", 0.5, minimum=0.0, maximum=0.99, help="Drop probability."),)

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        return inputs[0]
