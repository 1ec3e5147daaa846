"""Hand-written reference: the pytorch/examples MNIST network, trained for throughput."""

import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_common import cosine, parse_args, train, uniform_init  # noqa: E402


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(self.dropout2(x))


if __name__ == "__main__":
    args = parse_args(__doc__)
    torch.manual_seed(0)
    train(uniform_init(Net()),
          lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, fused=True), args,
          schedule=cosine(args.steps, 1e-3))
