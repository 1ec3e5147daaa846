"""Expert hand-written PaddlePaddle reference: ResNet-18, CIFAR variant (3x3 stem, no max-pool;
zoo resnet18_cifar), SGD with Nesterov momentum and weight decay as in the zoo template."""

from __future__ import annotations

import paddle
from paddle import nn
from paddle.nn import functional as F
from paddle_common import parse_args, run


def conv_bn(cin: int, cout: int, k: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2D(cin, cout, k, stride=stride, padding=(k - 1) // 2, bias_attr=False),
                         nn.BatchNorm2D(cout))


class BasicBlock(nn.Layer):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride)
        self.conv2 = conv_bn(cout, cout, 3, 1)
        self.shortcut = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        y = self.conv2(F.relu(self.conv1(x)))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


class ResNet18(nn.Layer):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = conv_bn(3, 64, 3, 1)
        blocks, cin = [], 64
        for stage in range(4):
            width = 64 * 2**stage
            for i in range(2):
                blocks.append(BasicBlock(cin, width, 2 if stage > 0 and i == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.blocks(F.relu(self.stem(x)))
        return self.fc(x.mean(axis=[2, 3]))


if __name__ == "__main__":
    run(ResNet18, lambda m: paddle.optimizer.Momentum(
        0.1, momentum=0.9, parameters=m.parameters(), use_nesterov=True,
        weight_decay=paddle.regularizer.L2Decay(5e-4)), parse_args())
