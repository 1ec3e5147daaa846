"""Small graphs of several ops that exercise the layout corners of the Keras mapper.

Each case is a valid pipeline spec: Input → a short chain or two branches → Output, with a
regression data layer so no class count constrains the output. Graphs of one op each are the
op catalogue's (tests/op_cases.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from core.spec import PipelineSpec
from core.validate import validate
from core.zoo.builder import GraphBuilder


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


# Graphs of several ops: layout changes between channels-last and channels-first, branches, and
# weights that depend on the layout of what feeds them. (One-op graphs: tests/op_cases.py.)
CORNERS: dict[str, Callable[[], PipelineSpec]] = {
    "maxpool_stem": lambda: chain([2, 16, 16], ("Tanh", {}), ("MaxPool2d", {"kernel_size": 3, "stride": 2,
                                                                            "padding": 1})),
    "layernorm_image": lambda: chain([3, 4, 5], ("Conv2d", {"out_channels": 2, "kernel_size": 1}),
                                     ("LayerNorm", {"eps": 1e-6})),
    "embedding_positions": lambda: chain([9], ("Embedding", {"num_embeddings": 50, "embedding_dim": 6}),
                                         ("PositionalEmbedding", {}), dtype="int64"),
    "activations": lambda: chain([3, 4, 4], ("ReLU6", {}), ("LeakyReLU", {"negative_slope": 0.2}), ("SiLU", {}),
                                 ("Sigmoid", {}), ("Tanh", {}), ("ReLU", {}), ("GELU", {}),
                                 ("GELU", {"approximate": "tanh"})),
    "softmax_channels": lambda: chain([3, 4, 5], ("Conv2d", {"out_channels": 4, "kernel_size": 1}),
                                      ("Softmax", {"axis": 0})),
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
