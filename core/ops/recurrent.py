"""Recurrent layers over sequences (T, F), batch-first. Parameter counts follow torch
(two bias vectors per gate set); Keras keeps one, whose value is their sum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, Tensor, Weight, bool_param, expect_rank, register_op, uniform


class _Recurrent(Op):
    family = "recurrent"
    gates: int = 1
    params = (
        Param("hidden_size", "int", example=64, minimum=1, maximum=65_536, help="Size of the hidden state."),
        Param("num_layers", "int", 1, minimum=1, maximum=64, help="Stacked layers."),
        bool_param("bidirectional", False, "Also run the sequence backwards and concatenate."),
        bool_param("return_sequences", False, "Return every step (T, H) instead of the last state (H)."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2], "a sequence (T, F)")
        width = p["hidden_size"] * (2 if p["bidirectional"] else 1)
        return Tensor((x.shape[0], width) if p["return_sequences"] else (width,))

    @classmethod
    def _per_layer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> list[tuple[int, int]]:
        """(input width, hidden) of each layer."""
        h, dirs = p["hidden_size"], 2 if p["bidirectional"] else 1
        widths = [inputs[0].shape[1]] + [h * dirs] * (p["num_layers"] - 1)
        return [(w, h) for w in widths]

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        """torch's names per layer and direction; every one U(±1/√hidden_size), as torch initialises them."""
        rows = cls.gates * p["hidden_size"]
        suffixes = ("", "_reverse") if p["bidirectional"] else ("",)
        weights: dict[str, Weight] = {}
        for layer, (width, h) in enumerate(cls._per_layer(inputs, p)):
            for suffix in suffixes:
                weights[f"weight_ih_l{layer}{suffix}"] = uniform(rows, width, fan_in=h)
                weights[f"weight_hh_l{layer}{suffix}"] = uniform(rows, h, fan_in=h)
                weights[f"bias_ih_l{layer}{suffix}"] = uniform(rows, fan_in=h)
                weights[f"bias_hh_l{layer}{suffix}"] = uniform(rows, fan_in=h)
        return weights

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        dirs = 2 if p["bidirectional"] else 1
        steps = inputs[0].shape[0]
        return steps * dirs * sum(cls.gates * h * (w + h) for w, h in cls._per_layer(inputs, p))


@register_op
class LSTM(_Recurrent):
    name = "LSTM"
    help = "Long short-term memory over a sequence (T, F)."
    gates = 4


@register_op
class GRU(_Recurrent):
    name = "GRU"
    help = "Gated recurrent unit over a sequence (T, F) (torch's reset-after form)."
    gates = 3
