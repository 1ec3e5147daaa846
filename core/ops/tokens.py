"""Images as token sequences (vision transformers): patches embedded as tokens, a learned class token."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ops.registry import Op, Param, ShapeError, Tensor, Weight, bool_param, expect_rank, register_op, uniform


@register_op
class PatchEmbed(Op):
    name = "PatchEmbed"
    family = "tokens"
    reads_channels = True
    help = ("Cuts an image (C, H, W) into non-overlapping patch_size patches and embeds each linearly: a sequence "
            "(H·W / patch², embed_dim) in row-major patch order (a Conv2d with kernel = stride = patch_size, "
            "flattened to tokens, as ViT).")
    params = (
        Param("patch_size", "int_pair", example=16, minimum=1, maximum=1024,
              help="Patch height and width; must divide the image's."),
        Param("embed_dim", "int", example=768, minimum=1, maximum=65_536, help="Width E of each token."),
        bool_param("bias", True, "Add a learned bias to each token."),
    )

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [3], "an image (C, H, W)")
        _, h, w = x.shape
        ph, pw = p["patch_size"]
        if h % ph or w % pw:
            raise ShapeError(f"patch_size {ph}×{pw} does not divide the image {h}×{w}",
                             expected=f"a patch size dividing {h}×{w}", field="patch_size",
                             fix="choose a patch size that divides the image, or resize the images")
        return Tensor(((h // ph) * (w // pw), p["embed_dim"]))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        c = inputs[0].shape[0]
        ph, pw = p["patch_size"]
        fan_in = c * ph * pw
        weights = {"weight": uniform(p["embed_dim"], c, ph, pw, fan_in=fan_in)}
        if p["bias"]:
            weights["bias"] = uniform(p["embed_dim"], fan_in=fan_in)
        return weights

    @classmethod
    def count_macs(cls, inputs: Sequence[Tensor], p: dict[str, Any], out: Tensor) -> int:
        return out.numel * inputs[0].shape[0] * p["patch_size"][0] * p["patch_size"][1]


@register_op
class ClassToken(Op):
    name = "ClassToken"
    family = "tokens"
    help = ("Prepends one learned token to a sequence (T, E) → (T + 1, E), the same for every sample; "
            "SequencePool(mode='first') reads it back after the encoder (ViT's class token).")

    @classmethod
    def infer(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> Tensor:
        x = inputs[0]
        expect_rank(x, [2], "a sequence (T, E)")
        return Tensor((x.shape[0] + 1, x.shape[1]))

    @classmethod
    def weights(cls, inputs: Sequence[Tensor], p: dict[str, Any]) -> dict[str, Weight]:
        return {"token": Weight((1, inputs[0].shape[1]), "normal", std=0.02)}
