"""Where tensors enter and leave the graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, register_op


@register_op
class Input(Op):
    name = "Input"
    family = "io"
    help = ("The samples from the data layer. Leave `shape` empty to take the data layer's input shape; "
            "use dtype int64 for token ids that feed an Embedding.")
    params = (
        Param("shape", "shape", None, optional=True,
              help="Shape of one sample without the batch axis, e.g. [1, 28, 28] or [784]."),
        Param("dtype", "choice", "float32", choices=("float32", "int64"),
              help="float32 for features and images, int64 for token ids."),
    )
    min_inputs = 0
    max_inputs = 0
    input_dtype = None

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        if p["shape"] is None:
            raise ShapeError("has no shape and the data layer gives none",
                             expected="a shape such as [1, 28, 28]", field="shape",
                             fix="set data.input_shape, or this node's shape")
        return Tensor(tuple(p["shape"]), p["dtype"])


@register_op
class Output(Op):
    name = "Output"
    family = "io"
    help = ("The model's prediction (logits for classification: the loss applies softmax itself). "
            "The training layer's loss is computed against it.")
    input_dtype = None

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        return inputs[0]
