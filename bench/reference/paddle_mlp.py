"""Expert hand-written PaddlePaddle reference: the benchmark MLP 784-512-512-10 (zoo mlp)."""

from __future__ import annotations

import paddle
from paddle import nn
from paddle_common import parse_args, run


def build() -> nn.Layer:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


if __name__ == "__main__":
    run(build, lambda m: paddle.optimizer.AdamW(1e-3, parameters=m.parameters(), weight_decay=0.01), parse_args())
