"""Hand-written reference: the U-Net of Ronneberger et al. (2015) with padded 3×3 convolutions (4 levels
down, 4 up, transposed 2×2 convolutions, skip connections joined encoder first), ``--base`` channels at the
top (64 in the paper; the CPU bench uses 16), Adam, per-pixel cross-entropy, the horizontal flip applied to
images and masks alike on the device; trained for throughput."""

import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_common import parse_args, train, uniform_init  # noqa: E402


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, base: int, classes: int = 4, depth: int = 4) -> None:
        super().__init__()
        widths = [base * 2 ** level for level in range(depth + 1)]
        self.down = nn.ModuleList([double_conv(3, base)] + [double_conv(widths[i - 1], widths[i])
                                                             for i in range(1, depth + 1)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2)
                                 for i in reversed(range(depth))])
        self.dec = nn.ModuleList([double_conv(2 * widths[i], widths[i]) for i in reversed(range(depth))])
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([skips.pop(), up(x)], 1))
        return self.head(x)


def flip_pair(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mirror each image and its mask left-right with probability ½ (one draw per sample)."""
    flip = torch.rand(x.shape[0], device=x.device) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(3), x), torch.where(flip[:, None, None], y.flip(2), y)


if __name__ == "__main__":
    args = parse_args(__doc__, (("--base", int, 16),))
    torch.manual_seed(0)
    train(uniform_init(UNet(args.base)), lambda m: torch.optim.Adam(m.parameters(), lr=1e-4, fused=True), args,
          augment_pair=flip_pair)
