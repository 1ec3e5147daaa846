"""Hand-written reference: ResNet-18 for 32×32 images (3×3 stem, no max-pool), SGD + Nesterov, random
crop and flip done on the device, trained for throughput."""

import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_common import cosine, parse_args, train, uniform_init  # noqa: E402


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        layers, cin = [], 64
        for stage, width in enumerate((64, 128, 256, 512)):
            for i in range(2):
                layers.append(BasicBlock(cin, width, 2 if stage > 0 and i == 0 else 1))
                cin = width
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


def crop_and_flip(x: torch.Tensor, padding: int = 4) -> torch.Tensor:
    """Random 4-pixel translation (zero padding) and horizontal flip, batched on the device."""
    n, c, h, w = x.shape
    padded = F.pad(x, (padding,) * 4)
    dy = torch.randint(0, 2 * padding + 1, (n,), device=x.device)
    dx = torch.randint(0, 2 * padding + 1, (n,), device=x.device)
    rows = (dy[:, None] + torch.arange(h, device=x.device))[:, None, :, None]
    cols = (dx[:, None] + torch.arange(w, device=x.device))[:, None, None, :]
    out = padded[torch.arange(n, device=x.device)[:, None, None, None], torch.arange(c, device=x.device)[None, :, None, None], rows, cols]
    flip = torch.rand(n, 1, 1, 1, device=x.device) < 0.5
    return torch.where(flip, out.flip(3), out)


if __name__ == "__main__":
    args = parse_args(__doc__)
    torch.manual_seed(0)
    train(uniform_init(ResNet18()),
          lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4,
                                    fused=True),
          args, schedule=cosine(args.steps, 0.1), augment=crop_and_flip)
