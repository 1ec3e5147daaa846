"""Small graphs that exercise every op and the layout corners of the Keras mapper.

Each case is a valid pipeline spec: Input → the op (or a short chain around it) → Output,
with a regression data layer so no class count constrains the output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from core.spec import PipelineSpec
from core.validate import validate
from core.zoo.builder import GraphBuilder


def one_op(op: str, shape: list[int], dtype: str = "float32", **params: Any) -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input", shape=shape, dtype=dtype)
    g.add("Output", g.add(op, x, **params), id="output")
    return _spec(g, shape, dtype)


def chain(shape: list[int], *layers: tuple[str, dict[str, Any]], dtype: str = "float32") -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input", shape=shape, dtype=dtype)
    g.add("Output", g.chain(x, *layers), id="output")
    return _spec(g, shape, dtype)


def _spec(g: GraphBuilder, shape: list[int], dtype: str = "float32") -> PipelineSpec:
    data = {"source": "x.npz", "format": "npz", "task": "regression", "input_shape": shape}
    if dtype == "int64":  # token ids come from a tokenized text column
        data.update(source="x.csv", format="csv", preprocessing=[{"op": "tokenize", "max_length": shape[0]}])
    return g.spec("case", "", data, {"loss": "mse"})


def branches(shape: list[int], merge: str, first: tuple[str, dict[str, Any]], second: tuple[str, dict[str, Any]],
             after: tuple[tuple[str, dict[str, Any]], ...] = (), **params: Any) -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input", shape=shape)
    a = g.add(first[0], x, **first[1])
    b = g.add(second[0], x, **second[1])
    y = g.chain(g.add(merge, a, b, **params), *after)
    g.add("Output", y, id="output")
    return _spec(g, shape)


def _relu() -> tuple[str, dict[str, Any]]:
    return ("ReLU", {})


CASES: dict[str, Callable[[], PipelineSpec]] = {
    "linear": lambda: one_op("Linear", [5], out_features=7),
    "linear_seq_nobias": lambda: one_op("Linear", [4, 6], out_features=3, bias=False),
    "conv2d": lambda: one_op("Conv2d", [3, 9, 8], out_channels=4, kernel_size=3),
    "conv2d_s2_p1": lambda: one_op("Conv2d", [3, 17, 13], out_channels=8, kernel_size=[3, 5], stride=2,
                                   padding=[1, 2]),
    "conv2d_p1_same": lambda: one_op("Conv2d", [3, 8, 8], out_channels=4, kernel_size=3, padding=1),
    "conv2d_same_s2": lambda: one_op("Conv2d", [2, 9, 8], out_channels=4, kernel_size=3, stride=2, padding="same"),
    "conv2d_same": lambda: one_op("Conv2d", [2, 9, 8], out_channels=4, kernel_size=4, padding="same"),
    "conv2d_grouped_dilated": lambda: one_op("Conv2d", [6, 15, 15], out_channels=4, kernel_size=3, dilation=2,
                                             groups=2),
    "conv2d_depthwise_x2": lambda: one_op("Conv2d", [3, 10, 10], out_channels=6, kernel_size=3, padding=1,
                                          groups=3),
    "conv2d_dilated_strided": lambda: one_op("Conv2d", [2, 15, 14], out_channels=3, kernel_size=3, stride=2,
                                             dilation=2, padding=1),
    "conv2d_valid_nobias": lambda: one_op("Conv2d", [2, 9, 8], out_channels=4, kernel_size=2, padding="valid",
                                          bias=False),
    "conv1d": lambda: one_op("Conv1d", [3, 21], out_channels=5, kernel_size=4, stride=2, padding=1),
    "conv1d_same": lambda: one_op("Conv1d", [3, 20], out_channels=5, kernel_size=3, padding="same"),
    "conv1d_depthwise": lambda: one_op("Conv1d", [4, 12], out_channels=4, kernel_size=3, groups=4),
    "conv_transpose2d": lambda: one_op("ConvTranspose2d", [3, 7, 5], out_channels=4, kernel_size=3, stride=2,
                                       padding=1, output_padding=1),
    "conv_transpose2d_plain": lambda: one_op("ConvTranspose2d", [3, 4, 4], out_channels=2, kernel_size=2,
                                             stride=2, bias=False),
    "maxpool": lambda: one_op("MaxPool2d", [2, 15, 14], kernel_size=3, stride=2),
    "maxpool_pad_ceil": lambda: one_op("MaxPool2d", [2, 15, 14], kernel_size=3, stride=2, padding=1,
                                       ceil_mode=True),
    "maxpool_ceil_odd": lambda: one_op("MaxPool2d", [2, 7, 7], kernel_size=2, ceil_mode=True),
    "maxpool_stem": lambda: chain([2, 16, 16], ("Tanh", {}), ("MaxPool2d", {"kernel_size": 3, "stride": 2,
                                                                            "padding": 1})),
    "avgpool": lambda: one_op("AvgPool2d", [2, 9, 8], kernel_size=2),
    "avgpool_pad": lambda: one_op("AvgPool2d", [2, 9, 8], kernel_size=3, stride=1, padding=1),
    "avgpool_pad_ceil": lambda: one_op("AvgPool2d", [2, 10, 9], kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "adaptive_even": lambda: one_op("AdaptiveAvgPool2d", [4, 9, 8], output_size=[3, 2]),
    "adaptive_uneven": lambda: one_op("AdaptiveAvgPool2d", [4, 9, 8], output_size=[4, 3]),
    "global_avg_image": lambda: one_op("GlobalAvgPool", [3, 5, 4]),
    "global_avg_signal": lambda: one_op("GlobalAvgPool", [3, 7]),
    "sequence_mean": lambda: one_op("SequencePool", [5, 4], mode="mean"),
    "sequence_max": lambda: one_op("SequencePool", [5, 4], mode="max"),
    "batchnorm1d": lambda: one_op("BatchNorm1d", [6]),
    "batchnorm1d_signal": lambda: one_op("BatchNorm1d", [6, 5], affine=False, eps=1e-3),
    "batchnorm2d": lambda: one_op("BatchNorm2d", [3, 4, 4], momentum=0.2),
    "layernorm": lambda: one_op("LayerNorm", [5, 8]),
    "layernorm_image": lambda: chain([3, 4, 5], ("Conv2d", {"out_channels": 2, "kernel_size": 1}),
                                     ("LayerNorm", {"eps": 1e-6})),
    "embedding_positions": lambda: chain([9], ("Embedding", {"num_embeddings": 50, "embedding_dim": 6}),
                                         ("PositionalEmbedding", {}), dtype="int64"),
    "lstm": lambda: one_op("LSTM", [5, 3], hidden_size=7),
    "lstm_2_bidir_seq": lambda: one_op("LSTM", [5, 3], hidden_size=4, num_layers=2, bidirectional=True,
                                       return_sequences=True),
    "lstm_bidir_last": lambda: one_op("LSTM", [6, 3], hidden_size=4, bidirectional=True),
    "gru_2": lambda: one_op("GRU", [4, 3], hidden_size=6, num_layers=2),
    "gru_bidir_seq": lambda: one_op("GRU", [4, 5], hidden_size=3, bidirectional=True, return_sequences=True),
    "mha": lambda: one_op("MultiheadAttention", [5, 8], num_heads=2),
    "mha_nobias": lambda: one_op("MultiheadAttention", [5, 8], num_heads=4, bias=False),
    "encoder": lambda: one_op("TransformerEncoderLayer", [5, 8], num_heads=2, dim_feedforward=16),
    "encoder_gelu_prenorm": lambda: one_op("TransformerEncoderLayer", [5, 8], num_heads=2, dim_feedforward=16,
                                           activation="gelu", norm_first=True, layer_norm_eps=1e-6),
    "activations": lambda: chain([3, 4, 4], ("ReLU6", {}), ("LeakyReLU", {"negative_slope": 0.2}), ("SiLU", {}),
                                 ("Sigmoid", {}), ("Tanh", {}), ("ReLU", {}), ("GELU", {}),
                                 ("GELU", {"approximate": "tanh"})),
    "softmax_vector": lambda: one_op("Softmax", [7]),
    "softmax_channels": lambda: chain([3, 4, 5], ("Conv2d", {"out_channels": 4, "kernel_size": 1}),
                                      ("Softmax", {"axis": 0})),
    "dropout": lambda: one_op("Dropout", [3, 4, 4], p=0.3),
    "add_conv": lambda: branches([3, 6, 6], "Add", ("Conv2d", {"out_channels": 4, "kernel_size": 3, "padding": 1}),
                                 ("Conv2d", {"out_channels": 4, "kernel_size": 1})),
    "concat_channels": lambda: branches([3, 6, 6], "Concat", ("Conv2d", {"out_channels": 4, "kernel_size": 1}),
                                        ("Conv2d", {"out_channels": 2, "kernel_size": 1}), axis=0),
    "concat_width": lambda: branches([3, 6, 6], "Concat", ("Conv2d", {"out_channels": 4, "kernel_size": 1}),
                                     ("Conv2d", {"out_channels": 4, "kernel_size": 1}), axis=-1),
    "concat_vectors": lambda: branches([5], "Concat", ("Linear", {"out_features": 3}),
                                       ("Linear", {"out_features": 2}), axis=-1),
    "flatten_output": lambda: chain([2, 3, 4], ("Conv2d", {"out_channels": 3, "kernel_size": 1}), ("Flatten", {})),
    "flatten_linear": lambda: chain([2, 5, 4], ("Conv2d", {"out_channels": 3, "kernel_size": 3}), ("Flatten", {}),
                                    ("Dropout", {"p": 0.5}), ("ReLU", {}), ("Linear", {"out_features": 4})),
    "flatten_signal_linear": lambda: chain([3, 8], ("Conv1d", {"out_channels": 2, "kernel_size": 3}),
                                           ("Flatten", {}), ("Linear", {"out_features": 3})),
    "flatten_layernorm": lambda: chain([2, 3, 3], ("Conv2d", {"out_channels": 3, "kernel_size": 1}),
                                       ("Flatten", {}), ("LayerNorm", {})),
    "reshape_to_image": lambda: chain([48], ("Linear", {"out_features": 48}), ("Reshape", {"shape": [3, 4, 4]}),
                                      ("Conv2d", {"out_channels": 2, "kernel_size": 3})),
    "reshape_from_image": lambda: chain([2, 4, 4], ("Conv2d", {"out_channels": 2, "kernel_size": 1}),
                                        ("Reshape", {"shape": [4, -1]}), ("Linear", {"out_features": 3})),
    "signal_to_sequence": lambda: chain([4, 10], ("Conv1d", {"out_channels": 6, "kernel_size": 3}),
                                        ("LSTM", {"hidden_size": 5})),
}


def sample_input(spec: PipelineSpec, batch: int = 2, seed: int = 1) -> np.ndarray:
    """A random batch for the spec's Input node (token ids below every Embedding's vocabulary)."""
    analysis = validate(spec)
    tensor = analysis.nodes[analysis.input_id].output  # type: ignore[index]
    shape = tensor.shape
    rng = np.random.default_rng(seed)
    if tensor.dtype == "int64":
        vocab = min(n.params["num_embeddings"] for n in spec.model.nodes if n.op == "Embedding")
        return rng.integers(0, vocab, size=(batch, *shape)).astype(np.int64)
    return rng.standard_normal((batch, *shape)).astype(np.float32)
