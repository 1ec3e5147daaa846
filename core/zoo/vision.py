"""Image classifiers. The ImageNet-shaped ones reproduce torchvision's architectures layer for
layer, so their parameter counts equal torchvision's published ones."""

from __future__ import annotations

from typing import Any

from core.spec import PipelineSpec
from core.zoo import zoo_model
from core.zoo.builder import GraphBuilder

_DIGITS_28 = {
    "source": "sklearn:digits",
    "batch_size": 64,
    "validation_split": 0.2,
    "preprocessing": [
        {"op": "resize", "size": [28, 28]},
        {"op": "scale", "max_value": 16.0},
        {"op": "normalize", "mean": [0.3], "std": [0.4]},
    ],
}

_IMAGENET_DATA = {
    "source": "imagenet/train",
    "format": "image_folder",
    "num_classes": 1000,
    "batch_size": 256,
    "validation_split": 0.02,
    "num_workers": 8,
    "preprocessing": [
        {"op": "resize", "size": [224, 224]},
        {"op": "scale", "max_value": 255.0},
        {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
    ],
    "augmentation": [{"op": "random_crop", "padding": 16}, {"op": "horizontal_flip", "p": 0.5}],
}

_IMAGENET_TRAINING: dict[str, Any] = {
    "epochs": 90,
    "loss": "cross_entropy",
    "label_smoothing": 0.1,
    "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
    "schedule": {"name": "cosine"},
    "precision": "auto",
    "resources": {"nodes": 2, "gpus_per_node": 4, "cpus_per_task": 8, "time_limit_min": 1440, "partition": "gpu"},
    "checkpoint": {"every_steps": 1000},
}

_SMALL_TRAINING: dict[str, Any] = {
    "epochs": 12,
    "loss": "cross_entropy",
    "optimizer": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.01},
    "schedule": {"name": "cosine"},
    "resources": {"nodes": 1, "gpus_per_node": 0, "cpus_per_task": 2, "time_limit_min": 30},
}


@zoo_model("mlp", "784-512-512-10 perceptron on sklearn digits upscaled to 28×28")
def mlp() -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.chain(x, ("Flatten", {}), ("Linear", {"out_features": 512}), ("ReLU", {}),
                ("Linear", {"out_features": 512}), ("ReLU", {}), ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    return g.spec("mlp", "Multi-layer perceptron (the benchmark MLP 784-512-512-10).", _DIGITS_28, _SMALL_TRAINING)


@zoo_model("lenet5", "LeNet-5 (LeCun 1998) on sklearn digits upscaled to 32×32")
def lenet5() -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.chain(
        x,
        ("Conv2d", {"out_channels": 6, "kernel_size": 5}), ("Tanh", {}), ("AvgPool2d", {"kernel_size": 2}),
        ("Conv2d", {"out_channels": 16, "kernel_size": 5}), ("Tanh", {}), ("AvgPool2d", {"kernel_size": 2}),
        ("Flatten", {}), ("Linear", {"out_features": 120}), ("Tanh", {}),
        ("Linear", {"out_features": 84}), ("Tanh", {}), ("Linear", {"out_features": 10}),
    )
    g.add("Output", x, id="output")
    data = {**_DIGITS_28, "preprocessing": [{"op": "resize", "size": [32, 32]}, {"op": "scale", "max_value": 16.0}]}
    return g.spec("lenet5", "LeNet-5 with tanh and average pooling.", data, _SMALL_TRAINING)


@zoo_model("mnist_cnn", "the pytorch/examples MNIST network on sklearn digits upscaled to 28×28")
def mnist_cnn() -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.chain(
        x,
        ("Conv2d", {"out_channels": 32, "kernel_size": 3}), ("ReLU", {}),
        ("Conv2d", {"out_channels": 64, "kernel_size": 3}), ("ReLU", {}),
        ("MaxPool2d", {"kernel_size": 2}), ("Dropout", {"p": 0.25}), ("Flatten", {}),
        ("Linear", {"out_features": 128}), ("ReLU", {}), ("Dropout", {"p": 0.5}),
        ("Linear", {"out_features": 10}),
    )
    g.add("Output", x, id="output")
    return g.spec("mnist_cnn", "Two convolutions, max-pooling, dropout and two linear layers "
                  "(pytorch/examples/mnist).", _DIGITS_28, _SMALL_TRAINING)


# --------------------------------------------------------------------------- ResNets


def _conv_bn(g: GraphBuilder, x: str, out: Any, k: int, s: Any, relu: bool = True, groups: int = 1,
             act: str = "ReLU", name: str | None = None) -> str:
    """Convolution, BatchNorm and (``relu``) an activation; ``name`` gives them the ids conv<name>,
    bn<name>, relu<name> (torchvision's names) instead of generated ones."""
    ids = {"conv": None, "bn": None, "relu": None} if name is None else \
        {"conv": f"conv{name}", "bn": f"bn{name}", "relu": f"relu{name}"}
    x = g.add("Conv2d", x, id=ids["conv"], out_channels=out, kernel_size=k, stride=s, padding=(k - 1) // 2,
              bias=False, **({"groups": groups} if groups != 1 else {}))
    x = g.add("BatchNorm2d", x, id=ids["bn"])
    return g.add(act, x, id=ids["relu"]) if relu else x


def _basic_block(g: GraphBuilder, x: str, cin: int, out: int, stride: int) -> str:
    y = _conv_bn(g, x, out, 3, stride)
    y = _conv_bn(g, y, out, 3, 1, relu=False)
    shortcut = _conv_bn(g, x, out, 1, stride, relu=False) if stride != 1 or cin != out else x
    return g.add("ReLU", g.add("Add", y, shortcut))


def _bottleneck(g: GraphBuilder, x: str, cin: int, width: int, stride: int) -> str:
    out = width * 4
    y = _conv_bn(g, x, width, 1, 1)
    y = _conv_bn(g, y, width, 3, stride)  # torchvision's v1.5: the stride sits on the 3×3
    y = _conv_bn(g, y, out, 1, 1, relu=False)
    shortcut = _conv_bn(g, x, out, 1, stride, relu=False) if stride != 1 or cin != out else x
    return g.add("ReLU", g.add("Add", y, shortcut))


def _resnet(g: GraphBuilder, x: str, blocks: list[int], bottleneck: bool, classes: int, cifar: bool,
            use_blocks: bool = True) -> str:
    """A ResNet; with ``use_blocks`` each residual block is one use of a block (``basic_block``,
    ``bottleneck``, and ``*_down`` for the first of a stage, with the projection shortcut), which is
    how torchvision writes it; without, the same layers flat (the same parameters and MACs)."""
    if cifar:
        x = _conv_bn(g, x, 64, 3, 1)
    else:
        x = _conv_bn(g, x, 64, 7, 2)
        x = g.add("MaxPool2d", x, kernel_size=3, stride=2, padding=1)
    cin = 64
    for stage, n in enumerate(blocks):
        width = 64 * 2**stage
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            out = width * 4 if bottleneck else width
            if use_blocks:
                down = stride != 1 or cin != out
                name = _residual_block(g, bottleneck, down)
                params = {"channels": width, **({"out_channels": out} if bottleneck else {}),
                          **({"stride": stride} if down else {})}
                x = g.add(name, x, id=f"layer{stage + 1}_{i}", **params)
            elif bottleneck:
                x = _bottleneck(g, x, cin, width, stride)
            else:
                x = _basic_block(g, x, cin, width, stride)
            cin = out
    x = g.add("GlobalAvgPool", x)
    return g.add("Linear", x, out_features=classes)


def _residual_block(g: GraphBuilder, bottleneck: bool, down: bool) -> str:
    """Define (once) the residual block ``basic_block``/``bottleneck`` (``*_down``: with a strided 1×1
    projection shortcut) in ``g`` and return its name."""
    body = GraphBuilder()
    channels: Any = {"param": "channels"}
    stride: Any = {"param": "stride"} if down else 1
    if bottleneck:
        name, what = "bottleneck", "ResNet bottleneck block (1×1, 3×3 with the stride, 1×1 to out_channels)"
        out: Any = {"param": "out_channels"}
        y = _conv_bn(body, "x", channels, 1, 1, name="1")
        y = _conv_bn(body, y, channels, 3, stride, name="2")
        y = _conv_bn(body, y, out, 1, 1, relu=False, name="3")
        params: dict[str, Any] = {"channels": 64}
    else:
        name, what = "basic_block", "ResNet basic block (two 3×3 convolutions and the shortcut)"
        out = channels
        y = _conv_bn(body, "x", channels, 3, stride, name="1")
        y = _conv_bn(body, y, channels, 3, 1, relu=False, name="2")
        params = {"channels": 64}
    shortcut = _conv_bn(body, "x", out, 1, stride, relu=False, name="_down") if down else "x"
    result = body.add("ReLU", body.add("Add", y, shortcut, id="add"), id="relu")
    if down:
        name, what, params = f"{name}_down", f"{what}, with a strided projection shortcut", {**params, "stride": 2}
    if bottleneck:
        # Block parameters are substituted whole: the 4× expansion is its own parameter.
        params["out_channels"] = 256
    return g.block(name, what, params, body, result)


@zoo_model("resnet18_cifar", "ResNet-18, CIFAR variant (3×3 stem, no max-pool) for 32×32 images, 10 classes")
def resnet18_cifar() -> PipelineSpec:
    g = GraphBuilder()
    x = _resnet(g, g.add("Input", id="input"), [2, 2, 2, 2], False, 10, cifar=True)
    g.add("Output", x, id="output")
    data = {
        "source": "cifar10/train", "format": "image_folder", "num_classes": 10, "batch_size": 128,
        "validation_split": 0.1, "input_shape": [3, 32, 32],
        "preprocessing": [{"op": "scale", "max_value": 255.0},
                          {"op": "normalize", "mean": [0.4914, 0.4822, 0.4465], "std": [0.247, 0.243, 0.261]}],
        "augmentation": [{"op": "random_crop", "padding": 4}, {"op": "horizontal_flip", "p": 0.5}],
    }
    training = {**_IMAGENET_TRAINING, "epochs": 30, "label_smoothing": 0.0,
                "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True},
                "resources": {"nodes": 1, "gpus_per_node": 1, "cpus_per_task": 8, "time_limit_min": 120,
                              "partition": "gpu"}}
    return g.spec("resnet18_cifar", "ResNet-18 adapted to 32×32 images (as in the CIFAR speed-runs).", data, training)


def _imagenet(name: str, description: str, g: GraphBuilder, head: str) -> PipelineSpec:
    g.add("Output", head, id="output")
    data = {**_IMAGENET_DATA, "input_shape": [3, 224, 224]}
    return g.spec(name, description, data, _IMAGENET_TRAINING)


@zoo_model("resnet18", "ResNet-18 for ImageNet (torchvision resnet18: 11,689,512 parameters)")
def resnet18() -> PipelineSpec:
    g = GraphBuilder()
    x = _resnet(g, g.add("Input", id="input"), [2, 2, 2, 2], False, 1000, cifar=False)
    return _imagenet("resnet18", "ResNet-18 (He et al. 2015), torchvision layout.", g, x)


@zoo_model("resnet50", "ResNet-50 v1.5 for ImageNet (torchvision resnet50: 25,557,032 parameters)")
def resnet50() -> PipelineSpec:
    g = GraphBuilder()
    x = _resnet(g, g.add("Input", id="input"), [3, 4, 6, 3], True, 1000, cifar=False)
    return _imagenet("resnet50", "ResNet-50 v1.5 (stride on the 3×3 convolution), torchvision layout.", g, x)


# --------------------------------------------------------------------------- VGG, AlexNet, MobileNetV2


@zoo_model("vgg16", "VGG-16 for ImageNet (torchvision vgg16: 138,357,544 parameters)")
def vgg16() -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    for width, n in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(n):
            x = g.chain(x, ("Conv2d", {"out_channels": width, "kernel_size": 3, "padding": 1}), ("ReLU", {}))
        x = g.add("MaxPool2d", x, kernel_size=2, stride=2)
    x = g.chain(
        x, ("AdaptiveAvgPool2d", {"output_size": [7, 7]}), ("Flatten", {}),
        ("Linear", {"out_features": 4096}), ("ReLU", {}), ("Dropout", {"p": 0.5}),
        ("Linear", {"out_features": 4096}), ("ReLU", {}), ("Dropout", {"p": 0.5}),
        ("Linear", {"out_features": 1000}),
    )
    return _imagenet("vgg16", "VGG-16 (configuration D) without batch normalisation.", g, x)


@zoo_model("alexnet", "AlexNet for ImageNet (torchvision alexnet: 61,100,840 parameters)")
def alexnet() -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.chain(
        x,
        ("Conv2d", {"out_channels": 64, "kernel_size": 11, "stride": 4, "padding": 2}), ("ReLU", {}),
        ("MaxPool2d", {"kernel_size": 3, "stride": 2}),
        ("Conv2d", {"out_channels": 192, "kernel_size": 5, "padding": 2}), ("ReLU", {}),
        ("MaxPool2d", {"kernel_size": 3, "stride": 2}),
        ("Conv2d", {"out_channels": 384, "kernel_size": 3, "padding": 1}), ("ReLU", {}),
        ("Conv2d", {"out_channels": 256, "kernel_size": 3, "padding": 1}), ("ReLU", {}),
        ("Conv2d", {"out_channels": 256, "kernel_size": 3, "padding": 1}), ("ReLU", {}),
        ("MaxPool2d", {"kernel_size": 3, "stride": 2}),
        ("AdaptiveAvgPool2d", {"output_size": [6, 6]}), ("Flatten", {}),
        ("Dropout", {"p": 0.5}), ("Linear", {"out_features": 4096}), ("ReLU", {}),
        ("Dropout", {"p": 0.5}), ("Linear", {"out_features": 4096}), ("ReLU", {}),
        ("Linear", {"out_features": 1000}),
    )
    return _imagenet("alexnet", "AlexNet, torchvision's single-tower variant.", g, x)


@zoo_model("mobilenet_v2", "MobileNetV2 for ImageNet (torchvision mobilenet_v2: 3,504,872 parameters)")
def mobilenet_v2() -> PipelineSpec:
    g = GraphBuilder()
    x = _conv_bn(g, g.add("Input", id="input"), 32, 3, 2, act="ReLU6")
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = _conv_bn(g, x, hidden, 1, 1, act="ReLU6") if t != 1 else x
            y = _conv_bn(g, y, hidden, 3, stride, groups=hidden, act="ReLU6")
            y = _conv_bn(g, y, c, 1, 1, relu=False)
            x = g.add("Add", y, x) if stride == 1 and cin == c else y
            cin = c
    x = _conv_bn(g, x, 1280, 1, 1, act="ReLU6")
    x = g.chain(x, ("GlobalAvgPool", {}), ("Dropout", {"p": 0.2}), ("Linear", {"out_features": 1000}))
    return _imagenet("mobilenet_v2", "MobileNetV2 (Sandler et al. 2018): inverted residuals, width 1.0.", g, x)
