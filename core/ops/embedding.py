"""Lookup tables for token ids, and learned positions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, Weight, expect_rank, register_op


@register_op
class Embedding(Op):
    name = "Embedding"
    family = "embedding"
    help = "Maps token ids (T) of dtype int64 to vectors (T, embedding_dim)."
    params = (
        Param("num_embeddings", "int", example=10_000, minimum=1, maximum=10_000_000, help="Vocabulary size."),
        Param("embedding_dim", "int", example=64, minimum=1, maximum=65_536, help="Size of each vector."),
        Param("init_std", "float", 1.0, minimum=1e-6, maximum=10.0,
              help="The table starts N(0, init_std): torch's 1.0, or GPT-2's 0.02 for a table tied to the head."),
    )
    input_dtype = "int64"

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [1], "token ids (T)")
        return Tensor(x.shape + (p["embedding_dim"],))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        return {"weight": Weight((p["num_embeddings"], p["embedding_dim"]), "normal", std=p["init_std"])}


@register_op
class PositionalEmbedding(Op):
    name = "PositionalEmbedding"
    family = "embedding"
    help = "Adds a learned vector per position to a sequence (T, F); T is taken from the input."

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2], "a sequence (T, F)")
        if x.numel > 100_000_000:
            raise ShapeError(f"a {x} position table is too large", expected="T·F ≤ 100,000,000")
        return x

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        return {"weight": Weight(inputs[0].shape, "normal", std=0.02)}
