"""Canonical weights: the names and shapes every framework's ``model.py`` agrees on.

Canonical weights are torch's layout of the logical (channels-first) model, keyed
``"<node id>/<name>"``. Each framework's generated ``model.py`` converts them into its
own parameters (``load_canonical_weights``) and back (``canonical_weights``), which is
how :mod:`core.equivalence` gives all frameworks the same weights.

Pure numpy: no framework is imported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from core.validate import Analysis, NodeInfo

Shapes = dict[str, tuple[int, ...]]

# Canonical names that are buffers (statistics), not trained parameters.
BUFFERS = frozenset({"running_mean", "running_var"})


def _linear(n: NodeInfo, fin: int) -> Shapes:
    out = n.params["out_features"]
    shapes: Shapes = {"weight": (out, fin)}
    if n.params["bias"]:
        shapes["bias"] = (out,)
    return shapes


def _dense(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    return _linear(n, ins[0][-1])


def _conv(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    p = n.params
    cin = ins[0][0]
    kernel = p["kernel_size"] if isinstance(p["kernel_size"], tuple) else (p["kernel_size"],)
    shapes: Shapes = {"weight": (p["out_channels"], cin // p["groups"], *kernel)}
    if p["bias"]:
        shapes["bias"] = (p["out_channels"],)
    return shapes


def _conv_transpose(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    p = n.params
    shapes: Shapes = {"weight": (ins[0][0], p["out_channels"], *p["kernel_size"])}
    if p["bias"]:
        shapes["bias"] = (p["out_channels"],)
    return shapes


def _batch_norm(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    c = ins[0][0]
    shapes: Shapes = {"weight": (c,), "bias": (c,)} if n.params["affine"] else {}
    shapes.update({"running_mean": (c,), "running_var": (c,)})
    return shapes


def _layer_norm(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    f = ins[0][-1]
    return {"weight": (f,), "bias": (f,)} if n.params["elementwise_affine"] else {}


def _embedding(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    return {"weight": (n.params["num_embeddings"], n.params["embedding_dim"])}


def _positional(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    return {"weight": tuple(ins[0])}


def _recurrent(gates: int) -> Callable[[NodeInfo, list[tuple[int, ...]]], Shapes]:
    def shapes_of(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
        p = n.params
        h = p["hidden_size"]
        dirs = ("", "_reverse") if p["bidirectional"] else ("",)
        shapes: Shapes = {}
        width = ins[0][1]
        for layer in range(p["num_layers"]):
            for suffix in dirs:
                shapes[f"weight_ih_l{layer}{suffix}"] = (gates * h, width)
                shapes[f"weight_hh_l{layer}{suffix}"] = (gates * h, h)
                shapes[f"bias_ih_l{layer}{suffix}"] = (gates * h,)
                shapes[f"bias_hh_l{layer}{suffix}"] = (gates * h,)
            width = h * len(dirs)
        return shapes

    return shapes_of


def _attention_shapes(e: int, bias: bool, prefix: str = "") -> Shapes:
    shapes: Shapes = {f"{prefix}in_proj_weight": (3 * e, e), f"{prefix}out_proj.weight": (e, e)}
    if bias:
        shapes[f"{prefix}in_proj_bias"] = (3 * e,)
        shapes[f"{prefix}out_proj.bias"] = (e,)
    return shapes


def _attention(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    return _attention_shapes(ins[0][1], n.params["bias"])


def _encoder_layer(n: NodeInfo, ins: list[tuple[int, ...]]) -> Shapes:
    e, f = ins[0][1], n.params["dim_feedforward"]
    shapes = _attention_shapes(e, True, "self_attn.")
    shapes.update({
        "linear1.weight": (f, e), "linear1.bias": (f,),
        "linear2.weight": (e, f), "linear2.bias": (e,),
        "norm1.weight": (e,), "norm1.bias": (e,),
        "norm2.weight": (e,), "norm2.bias": (e,),
    })
    return shapes


# op → function(node, input shapes) → {name: shape}; ops not listed have no weights.
WEIGHTS: dict[str, Callable[[NodeInfo, list[tuple[int, ...]]], Shapes]] = {
    "Linear": _dense,
    "Conv1d": _conv,
    "Conv2d": _conv,
    "ConvTranspose2d": _conv_transpose,
    "BatchNorm1d": _batch_norm,
    "BatchNorm2d": _batch_norm,
    "LayerNorm": _layer_norm,
    "Embedding": _embedding,
    "PositionalEmbedding": _positional,
    "LSTM": _recurrent(4),
    "GRU": _recurrent(3),
    "MultiheadAttention": _attention,
    "TransformerEncoderLayer": _encoder_layer,
}


def node_shapes(analysis: Analysis, node: NodeInfo) -> Shapes:
    """``{name: shape}`` of one node's canonical weights (empty for weight-free ops)."""
    fn = WEIGHTS.get(node.op)
    if fn is None:
        return {}
    ins = [analysis.nodes[s].output.shape for s in node.inputs]
    return fn(node, ins)


def canonical_shapes(analysis: Analysis) -> Shapes:
    """``{"<node>/<name>": shape}`` for the whole graph, in graph order."""
    out: Shapes = {}
    for node in analysis.nodes.values():
        for name, shape in node_shapes(analysis, node).items():
            out[f"{node.id}/{name}"] = tuple(int(d) for d in shape)
    return out


def trainable(key: str) -> bool:
    """Whether a canonical key is a trained parameter (BatchNorm statistics are not)."""
    return key.rsplit("/", 1)[-1] not in BUFFERS


def random_canonical(analysis: Analysis, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 canonical weights whose magnitudes keep activations well scaled.

    Weights and biases are U(±1/√fan_in) like the real initialisers; norm layers get
    non-trivial scale, shift and statistics (running_var strictly positive) so that a
    mapper that drops or misplaces one of them shows up as a difference.
    """
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for node in analysis.nodes.values():
        shapes = node_shapes(analysis, node)
        for name in shapes:
            arrays[f"{node.id}/{name}"] = _draw(rng, node, name, shapes).astype(np.float32)
    return arrays


def fan_in(node: NodeInfo, name: str, shapes: Shapes) -> int:
    """The fan-in that scales ``U(±1/√fan_in)`` for one weight or bias (torch's default rule)."""
    if node.op in ("LSTM", "GRU"):
        return int(node.params["hidden_size"])
    if node.op == "ConvTranspose2d":
        w = shapes["weight"]
        return int(w[1] * math.prod(w[2:]))
    weight = _weight_of(name)
    w = shapes.get(weight, shapes[name])
    return int(math.prod(w[1:])) if len(w) >= 2 else int(w[0])


def _weight_of(name: str) -> str:
    """The weight a bias belongs to: ``bias`` → ``weight``, ``x.in_proj_bias`` → ``x.in_proj_weight``."""
    head, _, leaf = name.rpartition(".")
    leaf = {"bias": "weight", "in_proj_bias": "in_proj_weight"}.get(leaf, leaf)
    return f"{head}.{leaf}" if head else leaf


def _draw(rng: np.random.Generator, node: NodeInfo, name: str, shapes: Shapes) -> np.ndarray:
    shape = shapes[name]
    leaf = name.rsplit(".", 1)[-1]
    is_norm = node.op in ("BatchNorm1d", "BatchNorm2d", "LayerNorm") or name.startswith("norm")
    if is_norm:
        if leaf in ("weight", "running_var"):
            return rng.uniform(0.5, 1.5, shape)
        if leaf == "running_mean":
            return rng.normal(0.0, 0.2, shape)
        return rng.uniform(-0.2, 0.2, shape)
    if node.op == "Embedding":
        return rng.normal(0.0, 1.0, shape)
    if node.op == "PositionalEmbedding":
        return rng.normal(0.0, 0.1, shape)
    bound = 1.0 / math.sqrt(max(1, fan_in(node, name, shapes)))
    return rng.uniform(-bound, bound, shape)
