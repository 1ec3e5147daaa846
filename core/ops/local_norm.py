"""Local response normalisation across channels (AlexNet, GoogLeNet, ZFNet).

Lives in its own module (not :mod:`core.ops.norm`) because it came with ONNX import: each channel
is divided by ``(k + alpha/size · Σ x²)^beta`` over the ``size`` neighbouring channels — torch's
``nn.LocalResponseNorm`` and ONNX's ``LRN`` alike for the odd sizes the catalogue allows (for an
even size the two frameworks centre the window differently).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, expect_rank, register_op


@register_op
class LocalResponseNorm(Op):
    name = "LocalResponseNorm"
    family = "norm"
    reads_channels = True
    help = ("Divides each channel by (k + alpha/size · sum of squares over `size` neighbouring channels)^beta "
            "(AlexNet's LRN); images (C, H, W) or signals (C, L).")
    params = (
        Param("size", "int", example=5, minimum=1, maximum=1023,
              help="Channels in the window (odd: the window is centred on the channel)."),
        Param("alpha", "float", 1e-4, minimum=0.0, maximum=1e3, help="Scale of the sum of squares."),
        Param("beta", "float", 0.75, minimum=0.0, maximum=10.0, help="Exponent."),
        Param("k", "float", 1.0, minimum=0.0, maximum=1e3, help="Added before the exponent."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        expect_rank(inputs[0], [2, 3], "an image (C, H, W) or a signal (C, L)")
        if p["size"] % 2 == 0:
            raise ShapeError(f"size {p['size']} is even", expected="an odd window size (centred on the channel)",
                             field="size")
        return inputs[0]
