"""Self-attention over sequences (T, E)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import (
    Op,
    Param,
    ShapeError,
    Tensor,
    Weight,
    affine_weights,
    bool_param,
    expect_rank,
    linear_weights,
    register_op,
    uniform,
)

_HEADS = Param("num_heads", "int", example=4, minimum=1, maximum=1024, help="Attention heads; must divide the width E.")
_CAUSAL = bool_param("causal", False, "Each position attends only to itself and the positions before it (a "
                     "decoder-only language model's self-attention).")


def _check_heads(x: Tensor, p: dict[str, Any]) -> None:
    expect_rank(x, [2], "a sequence (T, E)")
    e = x.shape[1]
    if e % p["num_heads"]:
        raise ShapeError(f"width {e} is not divisible by num_heads={p['num_heads']}",
                         expected=f"num_heads dividing {e}", field="num_heads")


def _attention_weights(e: int, bias: bool, prefix: str = "") -> dict[str, Weight]:
    """torch's packed q/k/v projection ``in_proj`` (3E, E) and ``out_proj`` (E, E), all of fan-in E."""
    weights = {f"{prefix}in_proj_weight": uniform(3 * e, e, fan_in=e),
               f"{prefix}out_proj.weight": uniform(e, e, fan_in=e)}
    if bias:
        weights.update({f"{prefix}in_proj_bias": uniform(3 * e, fan_in=e),
                        f"{prefix}out_proj.bias": uniform(e, fan_in=e)})
    return weights


def _attention_macs(t: int, e: int) -> int:
    return 4 * t * e * e + 2 * t * t * e  # q, k, v, out projections + scores + weighted sum (causal: the same
    # matrix products with half the scores masked, as the frameworks compute them)


@register_op
class MultiheadAttention(Op):
    name = "MultiheadAttention"
    family = "attention"
    help = "Multi-head self-attention over a sequence (T, E): queries, keys and values all come from the input."
    params = (
        _HEADS,
        Param("dropout", "float", 0.0, minimum=0.0, maximum=0.99, help="Dropout on attention weights."),
        bool_param("bias", True, "Biases in the projections."),
        _CAUSAL,
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        _check_heads(inputs[0], p)
        return inputs[0]

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        return _attention_weights(inputs[0].shape[1], p["bias"])

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
        Param("activation", "choice", "relu", choices=("relu", "gelu", "gelu_tanh"),
              help="Feed-forward activation: ReLU, exact GELU, or GELU with approximate='tanh' (GPT-2's)."),
        bool_param("norm_first", False, "Pre-norm (LayerNorm before each sub-block)."),
        Param("layer_norm_eps", "float", 1e-5, minimum=1e-12, maximum=1.0, help="LayerNorm epsilon."),
        _CAUSAL,
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        _check_heads(inputs[0], p)
        return inputs[0]

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        e, f = inputs[0].shape[1], p["dim_feedforward"]
        return {**_attention_weights(e, True, "self_attn."), **linear_weights(f, e, True, "linear1."),
                **linear_weights(e, f, True, "linear2."), **affine_weights(e, "norm1."), **affine_weights(e, "norm2.")}

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        t, e = inputs[0].shape
        return _attention_macs(t, e) + 2 * t * e * p["dim_feedforward"]
