"""Expert hand-written PaddlePaddle reference: the U-Net of Ronneberger et al. (2015) with padded 3×3
convolutions (4 levels down, 4 up, transposed 2×2 convolutions, skip connections joined encoder first),
``--base`` channels at the top (64 in the paper; the CPU bench uses 16), He-initialised convolutions, Adam,
per-pixel cross-entropy, the horizontal flip applied to each image and its mask alike (zoo unet)."""

from __future__ import annotations

import paddle
from paddle import nn
from paddle.nn import functional as F
from paddle_common import parse_args, run

CLASSES, DEPTH = 4, 4


def he(fan_in: int) -> dict[str, paddle.ParamAttr]:
    """He's N(0, 2/fan_in) weights and zero biases (fan-in as torch counts it)."""
    return {"weight_attr": paddle.ParamAttr(initializer=nn.initializer.Normal(0.0, (2.0 / fan_in) ** 0.5)),
            "bias_attr": paddle.ParamAttr(initializer=nn.initializer.Constant(0.0))}


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2D(cin, cout, 3, padding=1, **he(cin * 9)), nn.ReLU(),
                         nn.Conv2D(cout, cout, 3, padding=1, **he(cout * 9)), nn.ReLU())


class UNet(nn.Layer):
    def __init__(self, base: int, in_channels: int = 3) -> None:
        super().__init__()
        widths = [base * 2 ** level for level in range(DEPTH + 1)]
        self.down = nn.LayerList([double_conv(in_channels, base)] + [double_conv(widths[i - 1], widths[i])
                                                                     for i in range(1, DEPTH + 1)])
        self.up = nn.LayerList([nn.Conv2DTranspose(widths[i + 1], widths[i], 2, stride=2, **he(widths[i] * 4))
                                for i in reversed(range(DEPTH))])
        self.dec = nn.LayerList([double_conv(2 * widths[i], widths[i]) for i in reversed(range(DEPTH))])
        self.head = nn.Conv2D(base, CLASSES, 1, **he(base))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for i, (up, dec) in enumerate(zip(self.up, self.dec)):
            x = dec(paddle.concat([skips[DEPTH - 1 - i], up(x)], axis=1))
        return self.head(x)


def flip_pair(x: paddle.Tensor, y: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
    """Mirror each image and its mask left-right with probability ½ (one draw per sample), on the device."""
    flip = paddle.rand([x.shape[0]]) < 0.5
    return (paddle.where(flip.reshape([-1, 1, 1, 1]), x.flip([3]), x),
            paddle.where(flip.reshape([-1, 1, 1]), y.flip([2]), y))


if __name__ == "__main__":
    args = parse_args((("--base", int, 16),))
    run(lambda: UNet(args.base), lambda m: paddle.optimizer.Adam(1e-3, parameters=m.parameters(), epsilon=1e-8), args,
        loss_fn=lambda output, y: F.cross_entropy(output, y, axis=1), augment_pair=flip_pair)
