"""Channel shuffle (ShuffleNet): the channel axis seen as (groups, C/groups), transposed, flattened back.

Its own module because it came with ONNX import, where it is written Reshape → Transpose → Reshape
of the channel axis; the importer recognises that pattern and emits this op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, expect_rank, register_op


@register_op
class ChannelShuffle(Op):
    name = "ChannelShuffle"
    family = "shape"
    reads_channels = True
    help = ("Interleaves the channels of `groups` groups: channel g·(C/groups) + i moves to i·groups + g "
            "(ShuffleNet). Images (C, H, W) or signals (C, L).")
    params = (Param("groups", "int", example=2, minimum=1, maximum=65_536,
                    help="Number of groups; must divide the channels."),)

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2, 3], "an image (C, H, W) or a signal (C, L)")
        if x.shape[0] % p["groups"]:
            raise ShapeError(f"groups={p['groups']} does not divide the {x.shape[0]} channels",
                             expected=f"a divisor of {x.shape[0]}", field="groups")
        return x
