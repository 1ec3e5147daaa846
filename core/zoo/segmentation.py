"""Segmentation: the U-Net of Ronneberger et al. (2015), with padded 3×3 convolutions so that the
output has the input's height and width. Four levels down (two convolutions, then a 2×2 max-pool),
four up (a 2×2 transposed convolution halving the channels, the encoder's map of that level cropped to
it and joined, two convolutions), a 1×1 convolution to the classes. 64 channels at the top, 1024 at
the bottom: 31,031,940 parameters for 3 input channels and 4 classes (the hand-written torch module
in tests/mapping/unet_reference.py has the same). Every convolution starts from He's N(0, 2/fan_in) with
zero biases (``init: he``), as the paper's: from torch's default U(±1/√fan_in) this net, which has no
normalisation layers, passes too little of the image through its ReLUs to start learning (docs/segmentation.md)."""

from __future__ import annotations

from typing import Any

from core.spec import PipelineSpec
from core.zoo import zoo_model
from core.zoo.builder import GraphBuilder

SHAPES_CLASSES = 4  # background, disc, square, triangle: the example data's classes (core/example_shapes.py)


def _double_conv(g: GraphBuilder, x: str, channels: int, name: str) -> str:
    for i in (1, 2):
        x = g.add("Conv2d", x, id=f"{name}_conv{i}", out_channels=channels, kernel_size=3, padding=1, init="he")
        x = g.add("ReLU", x, id=f"{name}_relu{i}")
    return x


def unet_graph(g: GraphBuilder, classes: int, base: int = 64, depth: int = 4) -> str:
    """Input → the U-Net → (classes, H, W) scores; returns the head's id."""
    x = _double_conv(g, g.add("Input", id="input"), base, "enc0")
    skips = [x]
    for level in range(1, depth + 1):
        x = g.add("MaxPool2d", x, id=f"pool{level}", kernel_size=2)
        x = _double_conv(g, x, base * 2 ** level, f"enc{level}")
        skips.append(x)
    for level in range(depth - 1, -1, -1):
        channels = base * 2 ** level
        x = g.add("ConvTranspose2d", x, id=f"up{level}", out_channels=channels, kernel_size=2, stride=2, init="he")
        x = g.add("CropConcat", skips[level], x, id=f"skip{level}")  # the encoder's map first, as the paper
        x = _double_conv(g, x, channels, f"dec{level}")
    return g.add("Conv2d", x, id="head", out_channels=classes, kernel_size=1, init="he")


_SHAPES_DATA: dict[str, Any] = {
    "source": "shapes", "format": "image_folder", "task": "segmentation", "num_classes": SHAPES_CLASSES,
    "batch_size": 8, "validation_split": 0.1, "input_shape": [3, 64, 64],
    # each channel to zero mean and unit variance (the training split's): on pixels in [0, 1] alone (mean ~0.4)
    # the ReLU U-Net, which has no normalisation layers, sat predicting the background for epochs
    "preprocessing": [{"op": "scale", "max_value": 255.0}, {"op": "normalize"}],
    "augmentation": [{"op": "horizontal_flip", "p": 0.5}],
}


@zoo_model("unet", "U-Net (2015) with padded convolutions, 64 base channels, 4 down/4 up; coloured shapes, 4 classes")
def unet() -> PipelineSpec:
    g = GraphBuilder()
    g.add("Output", unet_graph(g, SHAPES_CLASSES), id="output")
    training = {"epochs": 20, "loss": "cross_entropy", "optimizer": {"name": "adam", "lr": 1e-3},
                "resources": {"nodes": 1, "gpus_per_node": 1, "cpus_per_task": 8, "time_limit_min": 120,
                              "partition": "gpu"}}
    return g.spec("unet", "U-Net (Ronneberger et al. 2015) with padded 3×3 convolutions: every pixel of a "
                  "64×64 image classified as background or one of three shapes.", _SHAPES_DATA, training)
