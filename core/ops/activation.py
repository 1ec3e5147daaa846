"""Element-wise activations and softmax."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import OnnxAttr, OnnxOp, Op, Param, ShapeError, Tensor, register_op


class _Elementwise(Op):
    family = "activation"

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        return inputs[0]


@register_op
class ReLU(_Elementwise):
    name = "ReLU"
    help = "max(x, 0)."
    onnx = OnnxOp("Relu")


@register_op
class ReLU6(_Elementwise):
    name = "ReLU6"
    help = "min(max(x, 0), 6) (MobileNet)."


@register_op
class Hardswish(_Elementwise):
    name = "Hardswish"
    help = "x·min(max(x + 3, 0), 6) / 6 (MobileNetV3)."
    onnx = OnnxOp("HardSwish")


@register_op
class LeakyReLU(_Elementwise):
    name = "LeakyReLU"
    help = "x if x > 0 else negative_slope·x."
    params = (Param("negative_slope", "float", 0.01, minimum=0.0, maximum=1.0, help="Slope for x < 0."),)
    onnx = OnnxOp("LeakyRelu", {"alpha": OnnxAttr("negative_slope", 0.01)})


@register_op
class ELU(_Elementwise):
    name = "ELU"
    help = "x if x > 0 else alpha·(exp(x) − 1)."
    params = (Param("alpha", "float", 1.0, minimum=0.0, maximum=10.0, help="Scale of the negative part."),)
    onnx = OnnxOp("Elu", {"alpha": OnnxAttr("alpha", 1.0)})


@register_op
class GELU(_Elementwise):
    name = "GELU"
    help = "Gaussian error linear unit; exact (erf) unless approximate='tanh'."
    params = (Param("approximate", "choice", "none", choices=("none", "tanh"), help="'none' (exact) or 'tanh'."),)


@register_op
class SiLU(_Elementwise):
    name = "SiLU"
    help = "x·sigmoid(x) (swish)."


@register_op
class Sigmoid(_Elementwise):
    name = "Sigmoid"
    help = "1 / (1 + exp(-x))."
    onnx = OnnxOp("Sigmoid")


@register_op
class Tanh(_Elementwise):
    name = "Tanh"
    help = "Hyperbolic tangent."
    onnx = OnnxOp("Tanh")


@register_op
class Softplus(_Elementwise):
    name = "Softplus"
    help = "log(1 + exp(x)), a smooth ReLU."
    onnx = OnnxOp("Softplus")


@register_op
class Softmax(Op):
    name = "Softmax"
    family = "activation"
    help = ("Softmax along `axis` (counted without the batch axis; -1 is the last). Not needed before a "
            "cross-entropy loss, which takes logits.")
    params = (Param("axis", "int", -1, minimum=-8, maximum=7, help="Axis of one sample, -1 = last."),)

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        n = len(x.shape)
        if not -n <= p["axis"] < n:
            raise ShapeError(f"axis {p['axis']} does not exist in a {n}-axis input ({x})",
                             expected=f"an axis in [{-n}, {n - 1}]", field="axis")
        return x
