"""Hard sigmoid: ONNX's HardSigmoid, max(0, min(1, alpha·x + beta)) — the gate of MobileNetV3's
squeeze-and-excitation blocks (torch's Hardsigmoid is alpha 1/6, beta 1/2). Its own module because
it came with ONNX import."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import OnnxAttr, OnnxOp, Op, Param, Tensor, register_op


@register_op
class HardSigmoid(Op):
    name = "HardSigmoid"
    family = "activation"
    help = "max(0, min(1, alpha·x + beta)); alpha 1/6 and beta 1/2 are torch's Hardsigmoid (ONNX's default is 0.2)."
    params = (
        Param("alpha", "float", 1 / 6, minimum=0.0, maximum=100.0, help="Slope."),
        Param("beta", "float", 0.5, minimum=-100.0, maximum=100.0, help="Offset."),
    )
    onnx = OnnxOp("HardSigmoid", {"alpha": OnnxAttr("alpha", 0.2), "beta": OnnxAttr("beta", 0.5)})

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        return inputs[0]
