"""Vision transformers (Dosovitskiy et al. 2020): patches embedded as tokens, a class token, learned
positions, pre-norm encoder layers with GELU, and a head on the class token. ``vit_b_16`` reproduces
torchvision's ``vit_b_16`` layer for layer, so its parameter count is torchvision's."""

from __future__ import annotations

from typing import Any

from core.spec import PipelineSpec
from core.zoo import zoo_model
from core.zoo.builder import GraphBuilder
from core.zoo.vision import _IMAGENET_DATA

_VIT_TRAINING: dict[str, Any] = {  # torchvision's ViT recipe, shortened
    "epochs": 300,
    "loss": "cross_entropy",
    "label_smoothing": 0.11,
    "optimizer": {"name": "adamw", "lr": 3e-3, "weight_decay": 0.3},
    "schedule": {"name": "warmup_cosine", "warmup_epochs": 30},
    "gradient_clip_norm": 1.0,
    "precision": "auto",
    "resources": {"nodes": 2, "gpus_per_node": 4, "cpus_per_task": 8, "time_limit_min": 1440, "partition": "gpu"},
    "checkpoint": {"every_steps": 1000},
}


def _vit(g: GraphBuilder, patch: int, width: int, depth: int, heads: int, mlp: int, classes: int,
         dropout: float, eps: float) -> str:
    """Input → PatchEmbed → ClassToken → PositionalEmbedding → depth pre-norm GELU encoder layers →
    LayerNorm → the class token → Linear (torchvision's VisionTransformer)."""
    x = g.add("Input", id="input")
    x = g.add("PatchEmbed", x, id="conv_proj", patch_size=patch, embed_dim=width)
    x = g.add("ClassToken", x, id="class_token")
    x = g.add("PositionalEmbedding", x, id="pos_embedding")
    if dropout:
        x = g.add("Dropout", x, id="dropout", p=dropout)
    for i in range(depth):
        x = g.add("TransformerEncoderLayer", x, id=f"encoder_layer_{i}", num_heads=heads, dim_feedforward=mlp,
                  dropout=dropout, activation="gelu", norm_first=True, layer_norm_eps=eps)
    x = g.add("LayerNorm", x, id="ln", eps=eps)
    x = g.add("SequencePool", x, id="class_output", mode="first")
    return g.add("Linear", x, id="head", out_features=classes)


@zoo_model("vit_b_16", "ViT-B/16 for ImageNet (torchvision vit_b_16: 86,567,656 parameters)")
def vit_b_16() -> PipelineSpec:
    g = GraphBuilder()
    x = _vit(g, patch=16, width=768, depth=12, heads=12, mlp=3072, classes=1000, dropout=0.0, eps=1e-6)
    g.add("Output", x, id="output")
    data = {**_IMAGENET_DATA, "input_shape": [3, 224, 224]}
    return g.spec("vit_b_16", "Vision transformer ViT-B/16 (Dosovitskiy et al. 2020), torchvision layout.", data,
                  _VIT_TRAINING)


@zoo_model("vit_cifar", "a small ViT (4×4 patches, 6 layers of width 128) for 32×32 images, 10 classes")
def vit_cifar() -> PipelineSpec:
    g = GraphBuilder()
    x = _vit(g, patch=4, width=128, depth=6, heads=4, mlp=256, classes=10, dropout=0.1, eps=1e-6)
    g.add("Output", x, id="output")
    data = {
        "source": "cifar10/train", "format": "image_folder", "num_classes": 10, "batch_size": 128,
        "validation_split": 0.1, "input_shape": [3, 32, 32],
        "preprocessing": [{"op": "scale", "max_value": 255.0},
                          {"op": "normalize", "mean": [0.4914, 0.4822, 0.4465], "std": [0.247, 0.243, 0.261]}],
        "augmentation": [{"op": "random_crop", "padding": 4}, {"op": "horizontal_flip", "p": 0.5}],
    }
    training = {**_VIT_TRAINING, "epochs": 50, "label_smoothing": 0.0,
                "optimizer": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.05},
                "schedule": {"name": "warmup_cosine", "warmup_epochs": 5},
                "resources": {"nodes": 1, "gpus_per_node": 1, "cpus_per_task": 8, "time_limit_min": 120,
                              "partition": "gpu"}}
    return g.spec("vit_cifar", "A small vision transformer for 32×32 images (4×4 patches: 64 tokens and a class "
                  "token).", data, training)
