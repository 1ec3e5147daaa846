"""Self-attention over sequences (T, E)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, bool_param, expect_rank, register_op

_HEADS = Param("num_heads", "int", minimum=1, maximum=1024, help="Attention heads; must divide the width E.")


def _check_heads(x: Tensor, p: dict[str, Any]) -> None:
    expect_rank(x, [2], "a sequence (T, E)")
    e = x.shape[1]
    if e % p["num_heads"]:
        raise ShapeError(f"width {e} is not divisible by num_heads={p['num_heads']}",
                         expected=f"num_heads dividing {e}", field="num_heads")


def _attention_macs(t: int, e: int) -> int:
    return 4 * t * e * e + 2 * t * t * e  # q, k, v, out projections + scores + weighted sum


@register_op
class MultiheadAttention(Op):
    name = "MultiheadAttention"
    family = "attention"
    help = "Multi-head self-attention over a sequence (T, E): queries, keys and values all come from the input."
    params = (
        _HEADS,
        Param("dropout", "float", 0.0, minimum=0.0, maximum=0.99, help="Dropout on attention weights."),
        bool_param("bias", True, "Biases in the projections."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        _check_heads(inputs[0], p)
        return inputs[0]

    @classmethod
    def count_params(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        e = inputs[0].shape[1]
        return 4 * e * e + (4 * e if p["bias"] else 0)

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        t, e = inputs[0].shape
        return _attention_macs(t, e)


@register_op
class TransformerEncoderLayer(Op):
    name = "TransformerEncoderLayer"
    family = "attention"
    help = ("One transformer encoder block on (T, E): self-attention and a feed-forward network, each with a "
            "residual connection and LayerNorm (post-norm unless norm_first).")
    params = (
        _HEADS,
        Param("dim_feedforward", "int", 2048, minimum=1, maximum=1_000_000, help="Hidden width of the feed-forward."),
        Param("dropout", "float", 0.1, minimum=0.0, maximum=0.99, help="Dropout inside the block."),
        Param("activation", "choice", "relu", choices=("relu", "gelu"), help="Feed-forward activation."),
        bool_param("norm_first", False, "Pre-norm (LayerNorm before each sub-block)."),
        Param("layer_norm_eps", "float", 1e-5, minimum=1e-12, maximum=1.0, help="LayerNorm epsilon."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        _check_heads(inputs[0], p)
        return inputs[0]

    @classmethod
    def count_params(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        e, f = inputs[0].shape[1], p["dim_feedforward"]
        return (4 * e * e + 4 * e) + (2 * e * f + f + e) + 4 * e

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        t, e = inputs[0].shape
        return _attention_macs(t, e) + 2 * t * e * p["dim_feedforward"]
