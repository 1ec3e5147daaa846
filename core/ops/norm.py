"""Normalisation layers. Parameters follow torch's conventions; the mappers convert
(torch momentum 0.1 is Keras/paddle momentum 0.9)."""

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
    register_op,
)

_EPS = Param("eps", "float", 1e-5, minimum=1e-12, maximum=1.0, help="Added to the variance for stability.")
_MOMENTUM = Param("momentum", "float", 0.1, minimum=0.0, maximum=1.0,
                  help="Weight of the new batch in the running statistics (torch convention).")


class _BatchNorm(Op):
    family = "norm"
    reads_channels = True
    params = (_EPS, _MOMENTUM, bool_param("affine", True, "Learn a scale and a shift."))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        c = inputs[0].shape[0]
        weights = affine_weights(c) if p["affine"] else {}
        weights.update({"running_mean": Weight((c,), "zeros", buffer=True),
                        "running_var": Weight((c,), "ones", buffer=True)})
        return weights


@register_op
class BatchNorm1d(_BatchNorm):
    name = "BatchNorm1d"
    help = "Batch normalisation of features (C) or signals (C, L), per channel."

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        expect_rank(inputs[0], [1, 2], "features (C) or a signal (C, L)")
        return inputs[0]


@register_op
class BatchNorm2d(_BatchNorm):
    name = "BatchNorm2d"
    help = "Batch normalisation of images (C, H, W), per channel."

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        expect_rank(inputs[0], [3], "an image (C, H, W)")
        return inputs[0]


@register_op
class LayerNorm(Op):
    name = "LayerNorm"
    family = "norm"
    help = "Normalises over the last axis of each sample (transformers)."
    params = (_EPS, bool_param("elementwise_affine", True, "Learn a scale and a shift."))

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        expect_rank(inputs[0], [1, 2, 3], "features, a sequence or an image")
        return inputs[0]

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        return affine_weights(inputs[0].shape[-1]) if p["elementwise_affine"] else {}


@register_op
class GroupNorm(Op):
    name = "GroupNorm"
    family = "norm"
    reads_channels = True
    help = ("Normalises each sample over groups of channels (and all positions) of an image (C, H, W) or a "
            "signal (C, L); independent of the batch size.")
    params = (
        Param("num_groups", "int", 1, minimum=1, maximum=65_536,
              help="Groups the channels are split into; must divide C (1: all channels together)."),
        _EPS,
        bool_param("affine", True, "Learn a scale and a shift per channel."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        expect_rank(inputs[0], [2, 3], "an image (C, H, W) or a signal (C, L)")
        c = inputs[0].shape[0]
        if c % p["num_groups"]:
            raise ShapeError(f"num_groups={p['num_groups']} does not divide the {c} channels",
                             expected=f"a divisor of {c}", field="num_groups")
        return inputs[0]

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        return affine_weights(inputs[0].shape[0]) if p["affine"] else {}
