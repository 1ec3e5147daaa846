"""Ops that join several tensors (residual connections, skip concatenations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, register_op


@register_op
class Add(Op):
    name = "Add"
    family = "merge"
    help = "Element-wise sum of two or more inputs of the same shape (residual connections)."
    min_inputs = 2
    max_inputs = 16

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        first = inputs[0]
        for i, t in enumerate(inputs[1:], start=1):
            if t.shape != first.shape:
                raise ShapeError(f"input {i} has shape {t} but input 0 has {first}",
                                 expected="all inputs of the same shape",
                                 fix="make both branches end in the same shape (e.g. a 1×1 Conv2d on the shortcut)")
        return first

    @classmethod
    def equal_axes(cls, p: dict[str, Any], rank: int) -> tuple[int, ...]:
        return tuple(range(rank))


@register_op
class Concat(Op):
    name = "Concat"
    family = "merge"
    help = ("Joins inputs along `axis` (without the batch axis: 0 is the channel axis of images and the "
            "feature axis of vectors; -1 the last axis). Input order follows the edges' ports.")
    params = (Param("axis", "int", 0, minimum=-8, maximum=7, help="Axis to join along."),)
    min_inputs = 2
    max_inputs = 16
    ordered_inputs = True

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        first = inputs[0]
        n = len(first.shape)
        axis = p["axis"]
        if not -n <= axis < n:
            raise ShapeError(f"axis {axis} does not exist in a {n}-axis input ({first})",
                             expected=f"an axis in [{-n}, {n - 1}]", field="axis")
        axis %= n
        total = 0
        for i, t in enumerate(inputs):
            if len(t.shape) != n or any(a != b for j, (a, b) in enumerate(zip(t.shape, first.shape)) if j != axis):
                raise ShapeError(f"input {i} has shape {t}, input 0 has {first}",
                                 expected=f"equal sizes on every axis except axis {axis}")
            total += t.shape[axis]
        return Tensor(first.shape[:axis] + (total,) + first.shape[axis + 1:])

    @classmethod
    def equal_axes(cls, p: dict[str, Any], rank: int) -> tuple[int, ...]:
        return tuple(a for a in range(rank) if a != p["axis"] % rank) if -rank <= p["axis"] < rank else ()


def centre_crop(size: Sequence[int], target: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(start, stop) on each spatial axis that crops ``size`` to ``target`` around its centre: the
    start is ``(size − target) // 2`` (an odd excess leaves its extra row or column at the end)."""
    return tuple(((s - t) // 2, (s - t) // 2 + t) for s, t in zip(size, target))


@register_op
class CropConcat(Op):
    name = "CropConcat"
    family = "merge"
    help = ("Joins inputs along the channel axis after cropping each, around its centre, to the smallest height "
            "and width (length of signals) among them: U-Net's skip connection, whose encoder map is larger than "
            "the upsampled decoder map. Input order follows the edges' ports.")
    min_inputs = 2
    max_inputs = 16
    ordered_inputs = True

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        first = inputs[0]
        n = len(first.shape)
        for i, t in enumerate(inputs):
            if len(t.shape) not in (2, 3, 4) or len(t.shape) != n:
                raise ShapeError(f"input {i} has shape {t}, input 0 has {first}",
                                 expected="images (C, H, W), signals (C, L) or volumes (C, D, H, W), all of one rank",
                                 fix="join only feature maps of one kind (use Concat for vectors and sequences)")
        target = tuple(min(t.shape[a] for t in inputs) for a in range(1, n))
        return Tensor((sum(t.shape[0] for t in inputs), *target))

    @classmethod
    def crops(cls, shapes: Sequence[Sequence[int]], out: Sequence[int]) -> list[tuple[tuple[int, int], ...] | None]:
        """Per input: its spatial (start, stop) pairs, or None when it already has the output's size."""
        return [None if tuple(s[1:]) == tuple(out[1:]) else centre_crop(s[1:], out[1:]) for s in shapes]
