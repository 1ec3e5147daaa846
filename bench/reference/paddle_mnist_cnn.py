"""Expert hand-written PaddlePaddle reference: the pytorch/examples MNIST network (zoo mnist_cnn)."""

from __future__ import annotations

import paddle
from paddle import nn
from paddle.nn import functional as F
from paddle_common import parse_args, run


class Net(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2D(1, 32, 3)
        self.conv2 = nn.Conv2D(32, 64, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = paddle.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return self.fc2(x)


if __name__ == "__main__":
    run(Net, lambda m: paddle.optimizer.AdamW(1e-3, parameters=m.parameters(), weight_decay=0.01), parse_args())
