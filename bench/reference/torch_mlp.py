"""Hand-written reference: the 784-512-512-10 perceptron, trained for throughput."""

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_common import cosine, parse_args, train, uniform_init  # noqa: E402

if __name__ == "__main__":
    args = parse_args(__doc__)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10))
    train(uniform_init(net), lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, fused=True),
          args, schedule=cosine(args.steps, 1e-3))
