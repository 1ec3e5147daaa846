"""U-Net (Ronneberger et al. 2015, padded convolutions) written plainly in PyTorch, as its users write it,
independently of the zoo's graph: the zoo's ``unet`` must have its parameter count and compute its function.

    python tests/mapping/unet_reference.py IN_CHANNELS CLASSES WEIGHTS.npz INPUT.npy OUTPUT.npy

prints ``{"params": N}`` and saves the module's output for INPUT after loading the canonical weights of the
zoo's graph (torch's names per node, in the graph's order) into its own parameters, in its own order.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from torch import nn


class DoubleConv(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Down(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.pool(x))


class Up(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        x = self.up(x)
        dy, dx = skip.shape[2] - x.shape[2], skip.shape[3] - x.shape[3]
        skip = skip[:, :, dy // 2:dy // 2 + x.shape[2], dx // 2:dx // 2 + x.shape[3]]  # crop the encoder's map
        return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        self.inc = DoubleConv(in_channels, 64)
        self.down1 = Down(64, 128)
        self.down2 = Down(128, 256)
        self.down3 = Down(256, 512)
        self.down4 = Down(512, 1024)
        self.up1 = Up(1024, 512)
        self.up2 = Up(512, 256)
        self.up3 = Up(256, 128)
        self.up4 = Up(128, 64)
        self.outc = nn.Conv2d(64, num_classes, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        return self.outc(x)


def main(in_channels: str, classes: str, weights_path: str, input_path: str, output_path: str) -> None:
    model = UNet(int(in_channels), int(classes)).eval()
    print(json.dumps({"params": sum(p.numel() for p in model.parameters())}))
    given = list(np.load(weights_path).values())  # the graph's weights, node by node in the graph's order
    own = model.state_dict()
    if [tuple(a.shape) for a in given] != [tuple(t.shape) for t in own.values()]:
        raise SystemExit("the graph's weights are not U-Net's, in U-Net's order")
    model.load_state_dict({k: torch.from_numpy(a) for k, a in zip(own, given)})
    with torch.no_grad():
        np.save(output_path, model(torch.from_numpy(np.load(input_path))).numpy())


if __name__ == "__main__":
    main(*sys.argv[1:])
