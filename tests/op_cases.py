"""The op-case catalogue: every test that needs "one small graph per op" takes its graphs from here.

Each case is an op, its parameters and its input shape(s); :meth:`OpCase.spec` makes the graph
Input → op → Output (merge ops get branches). The same cases drive

- the mapper tests of every framework (tests/mapping/test_op_catalogue.py: each case maps and binds
  every canonical weight; the per-framework files compile and lint the generated programs),
- the equivalence check of all frameworks (tests/frameworks/test_equivalence.py),
- the paddle-versus-torch and Keras-versus-reference runs (tests/mapping/test_*_mapping.py),
- the shape and parameter-count reference against PyTorch (tests/core/test_ops_reference.py),
- the canonical-weight checks (tests/core/test_weights.py).

A new op needs at least one case here (a test fails otherwise); add more where its layouts,
padding or parameters take different paths in a mapper. See docs/adding-an-op.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from core.spec import PipelineSpec

Shape = tuple[int, ...]
MERGE_OPS = ("Add", "Concat", "CropConcat")  # their cases read two branches of the input


@dataclass(frozen=True)
class OpCase:
    """One configuration of one op. ``shape`` is the Input's sample shape (no batch axis); a
    merge op (Add, Concat) reads ``tanh(x)`` and ``sigmoid(x)``, or, when ``other`` is given,
    ``tanh(x)`` and a second branch of shape ``other`` (Flatten → Linear → Reshape)."""

    name: str
    op: str
    shape: Shape
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    other: Shape | None = None

    def spec(self) -> PipelineSpec:
        return one_op_spec(f"op-{self.name}", self.op, self.shape, self.params, self.dtype, self.other)

    @property
    def input_shapes(self) -> list[Shape]:
        """The shapes the op itself receives, in port order."""
        if self.op in MERGE_OPS:
            return [self.shape, self.other or self.shape]
        return [self.shape]


def _c(name: str, op: str, shape: Shape, /, dtype: str = "float32", other: Shape | None = None,
       **params: Any) -> OpCase:
    return OpCase(name, op, shape, params, dtype, other)


CASES: tuple[OpCase, ...] = (
    # dense
    _c("Linear", "Linear", (16,), out_features=8),
    _c("Linear-sequence-nobias", "Linear", (5, 16), out_features=8, bias=False),
    # conv
    _c("Conv2d", "Conv2d", (3, 9, 9), out_channels=4, kernel_size=3),
    _c("Conv2d-padded", "Conv2d", (3, 8, 8), out_channels=4, kernel_size=3, padding=1),
    _c("Conv2d-same-stride2", "Conv2d", (3, 8, 8), out_channels=4, kernel_size=3, stride=2, padding="same"),
    _c("Conv2d-same-stride2-rect", "Conv2d", (3, 9, 8), out_channels=4, kernel_size=[3, 4], stride=2,
       padding="same"),
    _c("Conv2d-same-even-kernel", "Conv2d", (3, 7, 7), out_channels=4, kernel_size=4, padding="same"),
    _c("Conv2d-same-dilated", "Conv2d", (2, 9, 10), out_channels=4, kernel_size=3, dilation=2, padding="same"),
    _c("Conv2d-dilated-grouped", "Conv2d", (6, 9, 9), out_channels=6, kernel_size=3, padding=2, dilation=2, groups=3,
       bias=False),
    _c("Conv2d-grouped-padded", "Conv2d", (3, 7, 7), out_channels=6, kernel_size=3, groups=3, padding=[1, 2],
       bias=False),
    _c("Conv2d-depthwise-x2", "Conv2d", (3, 10, 10), out_channels=6, kernel_size=3, padding=1, groups=3),
    _c("Conv2d-strided-padded", "Conv2d", (3, 10, 10), out_channels=5, kernel_size=[3, 5], stride=2, padding=[1, 2]),
    _c("Conv2d-dilated-strided", "Conv2d", (2, 15, 14), out_channels=3, kernel_size=3, stride=2, dilation=2,
       padding=1),
    _c("Conv2d-valid-nobias", "Conv2d", (2, 9, 8), out_channels=4, kernel_size=2, padding="valid", bias=False),
    _c("Conv2d-he", "Conv2d", (3, 8, 8), out_channels=8, kernel_size=3, padding=1, init="he"),  # N(0, 2/27), bias 0
    _c("Conv1d", "Conv1d", (4, 12), out_channels=6, kernel_size=5, padding=2),
    _c("Conv1d-same", "Conv1d", (3, 20), out_channels=5, kernel_size=3, padding="same"),
    _c("Conv1d-same-stride2", "Conv1d", (4, 12), out_channels=6, kernel_size=3, stride=2, padding="same"),
    _c("Conv1d-depthwise", "Conv1d", (4, 12), out_channels=4, kernel_size=3, groups=4),
    _c("ConvTranspose2d", "ConvTranspose2d", (4, 5, 5), out_channels=3, kernel_size=3, stride=2, padding=1,
       output_padding=1),
    _c("ConvTranspose2d-nobias", "ConvTranspose2d", (3, 4, 4), out_channels=2, kernel_size=2, stride=2, bias=False),
    _c("ConvTranspose2d-he", "ConvTranspose2d", (4, 4, 4), out_channels=8, kernel_size=2, stride=2, init="he"),
    # norm
    _c("BatchNorm1d", "BatchNorm1d", (6,)),
    _c("BatchNorm1d-signal", "BatchNorm1d", (4, 10), momentum=0.2),
    _c("BatchNorm1d-signal-noaffine", "BatchNorm1d", (3, 6), affine=False, eps=1e-3),
    _c("BatchNorm2d", "BatchNorm2d", (4, 6, 6), eps=1e-3),
    _c("BatchNorm2d-momentum", "BatchNorm2d", (3, 4, 4), eps=1e-3, momentum=0.2),
    _c("LayerNorm", "LayerNorm", (5, 12)),
    _c("LayerNorm-eps", "LayerNorm", (4, 6), eps=1e-6),
    _c("GroupNorm", "GroupNorm", (6, 5, 4), num_groups=3),
    _c("GroupNorm-signal-noaffine", "GroupNorm", (4, 7), num_groups=2, affine=False, eps=1e-3),
    # embedding
    _c("Embedding", "Embedding", (7,), "int64", num_embeddings=50, embedding_dim=8),
    _c("PositionalEmbedding", "PositionalEmbedding", (7, 8)),
    # tokens
    _c("PatchEmbed", "PatchEmbed", (3, 8, 12), patch_size=4, embed_dim=6),
    _c("PatchEmbed-rect-nobias", "PatchEmbed", (2, 6, 8), patch_size=[3, 2], embed_dim=5, bias=False),
    _c("ClassToken", "ClassToken", (5, 6)),
    # recurrent
    _c("LSTM", "LSTM", (6, 5), hidden_size=4),
    _c("LSTM-bidirectional", "LSTM", (6, 5), hidden_size=4, bidirectional=True),
    _c("LSTM-stacked-sequences", "LSTM", (6, 5), hidden_size=4, num_layers=2, bidirectional=True,
       return_sequences=True),
    _c("GRU", "GRU", (6, 5), hidden_size=4),
    _c("GRU-stacked", "GRU", (4, 3), hidden_size=6, num_layers=2),
    _c("GRU-bidirectional", "GRU", (5, 3), hidden_size=4, bidirectional=True),
    _c("GRU-bidirectional-sequences", "GRU", (6, 5), hidden_size=4, bidirectional=True, return_sequences=True),
    # attention
    _c("MultiheadAttention", "MultiheadAttention", (5, 8), num_heads=2),
    _c("MultiheadAttention-nobias", "MultiheadAttention", (5, 8), num_heads=4, bias=False),
    _c("TransformerEncoderLayer", "TransformerEncoderLayer", (5, 8), num_heads=2, dim_feedforward=16),
    _c("TransformerEncoderLayer-prenorm-gelu", "TransformerEncoderLayer", (5, 8), num_heads=2, dim_feedforward=16,
       activation="gelu", norm_first=True),
    _c("MultiheadAttention-causal", "MultiheadAttention", (5, 8), num_heads=2, causal=True),
    _c("TransformerEncoderLayer-causal-prenorm", "TransformerEncoderLayer", (5, 8), num_heads=2, dim_feedforward=16,
       activation="gelu", norm_first=True, causal=True),
    _c("TransformerEncoderLayer-gpt2", "TransformerEncoderLayer", (5, 8), num_heads=2, dim_feedforward=32,
       activation="gelu_tanh", norm_first=True, causal=True, dropout=0.0),
    _c("TransformerEncoderLayer-causal", "TransformerEncoderLayer", (6, 8), num_heads=4, dim_feedforward=16,
       causal=True),
    _c("TransformerEncoderLayer-eps", "TransformerEncoderLayer", (5, 8), num_heads=2, dim_feedforward=16,
       layer_norm_eps=1e-6),
    # activation
    _c("ReLU", "ReLU", (3, 4, 4)),
    _c("ReLU6", "ReLU6", (12,)),
    _c("Hardswish", "Hardswish", (3, 4, 4)),
    _c("ELU", "ELU", (12,), alpha=0.5),
    _c("LeakyReLU", "LeakyReLU", (12,), negative_slope=0.2),
    _c("GELU", "GELU", (12,)),
    _c("GELU-tanh", "GELU", (12,), approximate="tanh"),
    _c("SiLU", "SiLU", (12,)),
    _c("Sigmoid", "Sigmoid", (12,)),
    _c("Tanh", "Tanh", (12,)),
    _c("Softplus", "Softplus", (3, 4, 4)),
    _c("Softmax", "Softmax", (10,)),
    _c("Softmax-channels", "Softmax", (4, 3, 3), axis=0),
    _c("Softmax-sequence", "Softmax", (3, 4), axis=0),
    # dropout
    _c("Dropout", "Dropout", (4, 6, 6), p=0.3),
    # pool
    _c("MaxPool2d", "MaxPool2d", (3, 9, 9), kernel_size=3, stride=2, padding=1),
    _c("MaxPool2d-unpadded", "MaxPool2d", (2, 15, 14), kernel_size=3, stride=2),
    _c("MaxPool2d-ceil", "MaxPool2d", (3, 7, 7), kernel_size=2, ceil_mode=True),
    _c("MaxPool2d-padded-ceil", "MaxPool2d", (2, 5, 7), kernel_size=2, stride=2, padding=1, ceil_mode=True),
    _c("MaxPool2d-padded-ceil-k3", "MaxPool2d", (2, 15, 14), kernel_size=3, stride=2, padding=1, ceil_mode=True),
    _c("AvgPool2d", "AvgPool2d", (3, 8, 8), kernel_size=2),
    _c("AvgPool2d-padded", "AvgPool2d", (3, 9, 9), kernel_size=3, stride=2, padding=1),
    _c("AvgPool2d-ceil", "AvgPool2d", (2, 8, 8), kernel_size=3, stride=2, ceil_mode=True),
    _c("AvgPool2d-padded-ceil", "AvgPool2d", (2, 10, 9), kernel_size=3, stride=2, padding=1, ceil_mode=True),
    _c("AvgPool2d-exclude-pad", "AvgPool2d", (3, 9, 8), kernel_size=3, stride=2, padding=1, count_include_pad=False),
    _c("AvgPool2d-exclude-pad-ceil", "AvgPool2d", (2, 10, 9), kernel_size=3, stride=2, padding=1, ceil_mode=True,
       count_include_pad=False),
    _c("AdaptiveAvgPool2d", "AdaptiveAvgPool2d", (3, 8, 8), output_size=2),
    _c("AdaptiveAvgPool2d-uneven", "AdaptiveAvgPool2d", (3, 7, 7), output_size=3),
    _c("AdaptiveAvgPool2d-rect", "AdaptiveAvgPool2d", (4, 9, 8), output_size=[4, 3]),
    _c("GlobalAvgPool", "GlobalAvgPool", (3, 5, 5)),
    _c("GlobalAvgPool-signal", "GlobalAvgPool", (4, 10)),
    _c("SequencePool-mean", "SequencePool", (5, 6), mode="mean"),
    _c("SequencePool-max", "SequencePool", (5, 6), mode="max"),
    _c("SequencePool-first", "SequencePool", (5, 6), mode="first"),
    # resize
    _c("Upsample-nearest", "Upsample", (2, 3, 4), scale_factor=2),
    _c("Upsample-nearest-rect", "Upsample", (2, 3, 4), scale_factor=[3, 2]),
    _c("Upsample-bilinear", "Upsample", (2, 4, 5), scale_factor=2, mode="bilinear"),
    _c("Upsample-bilinear-align-corners", "Upsample", (2, 4, 5), scale_factor=[2, 3], mode="bilinear",
       align_corners=True),
    # merge
    _c("Add", "Add", (3, 4, 4)),
    _c("Concat-channels", "Concat", (3, 4, 4), axis=0),
    _c("Concat-channels-uneven", "Concat", (2, 4), other=(3, 4), axis=0),
    _c("Concat-last", "Concat", (5, 6), axis=-1),
    _c("Concat-last-uneven", "Concat", (2, 3), other=(2, 5), axis=-1),
    _c("CropConcat-image", "CropConcat", (3, 8, 8), other=(2, 6, 5)),  # port 0 cropped by (1, 1) and (1, 2)
    _c("CropConcat-image-second-larger", "CropConcat", (2, 4, 4), other=(3, 7, 6)),  # port 1 cropped, odd excess
    _c("CropConcat-same-size", "CropConcat", (3, 4, 4)),
    _c("CropConcat-signal", "CropConcat", (3, 9), other=(2, 6)),
    # shape
    _c("Flatten", "Flatten", (3, 4, 5)),
    _c("Reshape", "Reshape", (2, 4, 4), shape=[4, 8]),
    _c("Reshape-infer", "Reshape", (12,), shape=[3, -1]),
    _c("ChannelShuffle", "ChannelShuffle", (6, 4, 5), groups=3),
    _c("ChannelShuffle-signal", "ChannelShuffle", (8, 7), groups=2),
    _c("HardSigmoid", "HardSigmoid", (3, 5, 4)),
    _c("HardSigmoid-onnx-default", "HardSigmoid", (7,), alpha=0.2, beta=0.4),
    # local response norm (ONNX import: AlexNet, GoogLeNet)
    _c("LocalResponseNorm", "LocalResponseNorm", (7, 5, 4), size=5, alpha=0.5, beta=0.75, k=2.0),
    _c("LocalResponseNorm-signal", "LocalResponseNorm", (4, 9), size=3),
)

BY_NAME: dict[str, OpCase] = {case.name: case for case in CASES}


def specs() -> dict[str, PipelineSpec]:
    """case name → its graph."""
    return {case.name: case.spec() for case in CASES}


def _spec(name: str, shape: Shape, nodes: list[dict[str, Any]], edges: list[dict[str, Any]],
          dtype: str = "float32") -> PipelineSpec:
    if dtype == "int64":
        data: dict[str, Any] = {"source": "tokens.csv", "format": "csv", "task": "regression",
                                "input_shape": list(shape), "preprocessing": [
                                    {"op": "tokenize", "column": "text", "max_length": shape[0]}]}
    else:
        data = {"source": "arrays.npz", "format": "npz", "task": "regression", "input_shape": list(shape)}
    return PipelineSpec.model_validate({
        "name": name, "data": data, "model": {"nodes": nodes, "edges": edges},
        "training": {"loss": "mse", "epochs": 1}})


def one_op_spec(name: str, op: str, shape: Shape, params: dict[str, Any] | None = None,
                dtype: str = "float32", other: Shape | None = None) -> PipelineSpec:
    """Input → op (node id ``node``) → Output, on regression data so that any output shape is accepted."""
    inp = {"id": "input", "op": "Input", "params": {"dtype": dtype} if dtype != "float32" else {}}
    node = {"id": "node", "op": op, "params": params or {}}
    out = {"id": "output", "op": "Output"}
    if op not in MERGE_OPS:
        edges = [{"source": "input", "target": "node"}, {"source": "node", "target": "output"}]
        return _spec(name, shape, [inp, node, out], edges, dtype)
    a, b = {"id": "a", "op": "Tanh"}, {"id": "b", "op": "Sigmoid"}
    if other is None:
        edges = [{"source": "input", "target": "a"}, {"source": "input", "target": "b"}]
        nodes = [inp, a, b]
    else:
        b = {"id": "b", "op": "Reshape", "params": {"shape": list(other)}}
        nodes = [inp, a, {"id": "flat", "op": "Flatten"},
                 {"id": "fc", "op": "Linear", "params": {"out_features": math.prod(other)}}, b]
        edges = [{"source": "input", "target": "a"}, {"source": "input", "target": "flat"},
                 {"source": "flat", "target": "fc"}, {"source": "fc", "target": "b"}]
    edges += [{"source": "a", "target": "node", "port": 0}, {"source": "b", "target": "node", "port": 1},
              {"source": "node", "target": "output"}]
    return _spec(name, shape, [*nodes, node, out], edges, dtype)


def flatten_linear_spec() -> PipelineSpec:
    """Conv2d → Flatten → Linear: the one layout a one-op graph cannot show (Keras's Dense after a
    channels-last Flatten needs its kernel rows permuted)."""
    nodes = [{"id": "input", "op": "Input"},
             {"id": "conv", "op": "Conv2d", "params": {"out_channels": 3, "kernel_size": 3}},
             {"id": "flatten", "op": "Flatten"},
             {"id": "fc", "op": "Linear", "params": {"out_features": 5}},
             {"id": "output", "op": "Output"}]
    edges = [{"source": a, "target": b} for a, b in
             (("input", "conv"), ("conv", "flatten"), ("flatten", "fc"), ("fc", "output"))]
    return _spec("flatten-linear", (2, 6, 7), nodes, edges)


def tied_head_spec(bias: bool = True, tie_to: str = "wte", out_features: int = 11) -> PipelineSpec:
    """Embedding → LayerNorm → Linear tied to the Embedding (``tie_to``): a language model's head sharing
    its token table, which a one-op graph cannot show."""
    nodes = [{"id": "input", "op": "Input", "params": {"dtype": "int64"}},
             {"id": "wte", "op": "Embedding", "params": {"num_embeddings": 11, "embedding_dim": 8}},
             {"id": "ln", "op": "LayerNorm"},
             {"id": "head", "op": "Linear", "params": {"out_features": out_features, "bias": bias, "tie_to": tie_to}},
             {"id": "output", "op": "Output"}]
    edges = [{"source": a, "target": b} for a, b in
             (("input", "wte"), ("wte", "ln"), ("ln", "head"), ("head", "output"))]
    return _spec("tied-head", (6,), nodes, edges, "int64")
