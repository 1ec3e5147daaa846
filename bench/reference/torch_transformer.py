"""Hand-written reference: 4 transformer encoder layers (d256, 8 heads, feed-forward 1024) over 128
steps, mean-pooled, 10 classes; trained for throughput."""

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_common import cosine, parse_args, train, uniform_init  # noqa: E402


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.TransformerEncoderLayer(256, 8, 1024, 0.1, batch_first=True)
                                      for _ in range(4)])
        self.head = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(x).mean(dim=1))


if __name__ == "__main__":
    args = parse_args(__doc__)
    torch.manual_seed(0)
    train(uniform_init(Encoder()),
          lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, fused=True), args,
          schedule=cosine(args.steps, 1e-3))
