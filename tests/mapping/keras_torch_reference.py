"""A tiny functional PyTorch interpreter of a pipeline graph: the reference the Keras mapping is compared with.

Run as a script in its own process (the test process never imports a framework):

    python tests/mapping/keras_torch_reference.py GRAPH.json WEIGHTS.npz INPUT.npy OUTPUT.npy

GRAPH.json is ``core.validate.Analysis.summary()`` plus each node's normalised params; the
weights are canonical (torch layout, ``<node>/<name>``). Everything runs in eval mode.
Written independently of the torch mapper so that both mappers are checked against the
op catalogue's meaning, not against each other.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _tf_same_pad(x: torch.Tensor, kernel: list[int], stride: list[int], dilation: list[int]) -> torch.Tensor:
    pads: list[int] = []
    for n, k, s, d in reversed(list(zip(x.shape[2:], kernel, stride, dilation))):
        total = max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads)


def _as_list(v: object, n: int) -> list[int]:
    return list(v) if isinstance(v, (list, tuple)) else [int(v)] * n  # type: ignore[arg-type]


def _module_with(module: nn.Module, w: dict[str, np.ndarray]) -> nn.Module:
    state = {k: torch.from_numpy(v) for k, v in w.items()}
    module.load_state_dict(state)
    return module.eval()


def run_node(op: str, p: dict, xs: list[torch.Tensor], w: dict[str, np.ndarray]) -> torch.Tensor:
    t = {k: torch.from_numpy(v) for k, v in w.items()}
    x = xs[0] if xs else None
    if op in ("Input", "Output", "Dropout"):
        return x
    if op == "Linear":
        return F.linear(x, t["weight"], t.get("bias"))
    if op in ("Conv2d", "Conv1d"):
        dims = 2 if op == "Conv2d" else 1
        conv = F.conv2d if dims == 2 else F.conv1d
        k, s, d = _as_list(p["kernel_size"], dims), _as_list(p["stride"], dims), _as_list(p["dilation"], dims)
        if p["padding"] == "same":
            x, pad = _tf_same_pad(x, k, s, d), 0
        elif p["padding"] == "valid":
            pad = 0
        else:
            pad = _as_list(p["padding"], 2)[:dims]
        return conv(x, t["weight"], t.get("bias"), stride=s, padding=pad, dilation=d, groups=p["groups"])
    if op == "ConvTranspose2d":
        return F.conv_transpose2d(x, t["weight"], t.get("bias"), stride=p["stride"], padding=p["padding"],
                                  output_padding=p["output_padding"])
    if op == "MaxPool2d":
        return F.max_pool2d(x, p["kernel_size"], p["stride"] or p["kernel_size"], p["padding"],
                            ceil_mode=p["ceil_mode"])
    if op == "AvgPool2d":
        return F.avg_pool2d(x, p["kernel_size"], p["stride"] or p["kernel_size"], p["padding"],
                            ceil_mode=p["ceil_mode"])
    if op == "AdaptiveAvgPool2d":
        return F.adaptive_avg_pool2d(x, p["output_size"])
    if op == "GlobalAvgPool":
        return x.mean(dim=tuple(range(2, x.dim())))
    if op == "SequencePool":
        return x.mean(dim=1) if p["mode"] == "mean" else x.amax(dim=1)
    if op in ("BatchNorm1d", "BatchNorm2d"):
        return F.batch_norm(x, t["running_mean"], t["running_var"], t.get("weight"), t.get("bias"), False,
                            0.0, p["eps"])
    if op == "LayerNorm":
        return F.layer_norm(x, (x.shape[-1],), t.get("weight"), t.get("bias"), p["eps"])
    simple = {"ReLU": F.relu, "ReLU6": F.relu6, "SiLU": F.silu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh}
    if op in simple:
        return simple[op](x)
    if op == "LeakyReLU":
        return F.leaky_relu(x, p["negative_slope"])
    if op == "GELU":
        return F.gelu(x, approximate=p["approximate"])
    if op == "Softmax":
        return F.softmax(x, dim=p["axis"] + 1 if p["axis"] >= 0 else p["axis"])
    if op == "Embedding":
        return F.embedding(x, t["weight"])
    if op == "PositionalEmbedding":
        return x + t["weight"]
    if op in ("LSTM", "GRU"):
        cls = nn.LSTM if op == "LSTM" else nn.GRU
        rnn = _module_with(cls(x.shape[-1], p["hidden_size"], num_layers=p["num_layers"],
                               bidirectional=p["bidirectional"], batch_first=True), w)
        seq = rnn(x)[0]
        if p["return_sequences"]:
            return seq
        if not p["bidirectional"]:
            return seq[:, -1]
        h = p["hidden_size"]
        return torch.cat([seq[:, -1, :h], seq[:, 0, h:]], dim=-1)
    if op == "MultiheadAttention":
        e = x.shape[-1]
        mha = _module_with(nn.MultiheadAttention(e, p["num_heads"], bias=p["bias"], batch_first=True), w)
        return mha(x, x, x, need_weights=False)[0]
    if op == "TransformerEncoderLayer":
        layer = nn.TransformerEncoderLayer(x.shape[-1], p["num_heads"], p["dim_feedforward"], p["dropout"],
                                           p["activation"], p["layer_norm_eps"], batch_first=True,
                                           norm_first=p["norm_first"])
        return _module_with(layer, w)(x)
    if op == "Add":
        out = xs[0]
        for y in xs[1:]:
            out = out + y
        return out
    if op == "Concat":
        return torch.cat(xs, dim=p["axis"] + 1 if p["axis"] >= 0 else p["axis"])
    if op == "Flatten":
        return torch.flatten(x, 1)
    if op == "Reshape":
        return x.reshape(x.shape[0], *p["shape"])
    raise SystemExit(f"reference: no implementation for op {op}")


def main(graph_path: str, weights_path: str, input_path: str, output_path: str) -> None:
    torch.manual_seed(0)
    graph = json.loads(open(graph_path, encoding="utf-8").read())
    arrays = dict(np.load(weights_path))
    values: dict[str, torch.Tensor] = {}
    x = torch.from_numpy(np.load(input_path))
    with torch.no_grad():
        for node in graph["layers"]:
            prefix = node["id"] + "/"
            w = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            ins = [values[s] for s in node["inputs"]] if node["inputs"] else [x]
            values[node["id"]] = run_node(node["op"], node["params"], ins, w)
    np.save(output_path, values[graph["output"]].numpy())


if __name__ == "__main__":
    main(*sys.argv[1:5])
