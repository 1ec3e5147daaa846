"""The reference: what each op of the catalogue means, written directly in PyTorch.

Written independently of the mappers (it never reads generated code) so that they are checked
against the op catalogue's meaning, not against each other. Two uses, each in its own process
(the test process never imports a framework):

    python tests/mapping/torch_reference.py graph GRAPH.json WEIGHTS.npz INPUT.npy OUTPUT.npy
    python tests/mapping/torch_reference.py layers CASES.json

``graph`` runs a whole pipeline graph in eval mode with canonical weights (torch layout,
``<node>/<name>``; the Keras mapper's tests compare with it); GRAPH.json is
``core.validate.Analysis.summary()`` plus each node's normalised params. ``layers`` builds one
torch layer per case (``{"op", "params", "shapes", "dtype"}``), runs random inputs through it and
prints each output shape and parameter count (tests/core/test_ops_reference.py compares them with
the catalogue's shape inference and parameter counts).

An op whose name and parameters are those of a ``torch.nn`` module (ReLU6, LeakyReLU, Hardswish…)
needs nothing here: :func:`build` falls back on ``getattr(torch.nn, op)(**params)``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

Forward = Callable[[list[torch.Tensor]], torch.Tensor]


class PositionalEmbedding(nn.Module):
    """A learned vector per position, added to the sequence."""

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(*shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.weight


class ClassToken(nn.Module):
    """A learned token (1, E) put in front of every sequence."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.token.expand(x.shape[0], 1, x.shape[2]), x], dim=1)


def _tf_same_pad(x: torch.Tensor, kernel: list[int], stride: list[int], dilation: list[int]) -> torch.Tensor:
    """'same' padding as TensorFlow places it (the odd pixel at the end), which the catalogue defines."""
    pads: list[int] = []
    for n, k, s, d in reversed(list(zip(x.shape[2:], kernel, stride, dilation))):
        total = max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads)


def _as_list(v: object, n: int) -> list[int]:
    return list(v) if isinstance(v, (list, tuple)) else [int(v)] * n  # type: ignore[arg-type]


def _torch_dim(axis: int) -> int:
    return axis + 1 if axis >= 0 else axis


def _conv(op: str, p: dict[str, Any], cin: int) -> tuple[nn.Module, Forward]:
    dims = 2 if op == "Conv2d" else 1
    k, s, d = _as_list(p["kernel_size"], dims), _as_list(p["stride"], dims), _as_list(p["dilation"], dims)
    pad = 0 if p["padding"] in ("same", "valid") else _as_list(p["padding"], 2)[:dims]
    cls = nn.Conv2d if dims == 2 else nn.Conv1d
    m = cls(cin, p["out_channels"], k, stride=s, padding=pad, dilation=d, groups=p["groups"], bias=p["bias"])
    if p["padding"] == "same":
        return m, lambda xs: m(_tf_same_pad(xs[0], k, s, d))
    return m, lambda xs: m(xs[0])


def _recurrent(op: str, p: dict[str, Any], width: int) -> tuple[nn.Module, Forward]:
    cls = nn.LSTM if op == "LSTM" else nn.GRU
    m = cls(width, p["hidden_size"], num_layers=p["num_layers"], bidirectional=p["bidirectional"], batch_first=True)

    def forward(xs: list[torch.Tensor]) -> torch.Tensor:
        seq = m(xs[0])[0]
        if p["return_sequences"]:
            return seq
        if not p["bidirectional"]:
            return seq[:, -1]
        h = p["hidden_size"]
        return torch.cat([seq[:, -1, :h], seq[:, 0, h:]], dim=-1)  # forward ends last, backward first

    return m, forward


def _modules(op: str, p: dict[str, Any], shape: list[int]) -> tuple[nn.Module, Forward] | None:
    """The ops held by a torch module whose constructor needs more than the op's own parameters."""
    if op == "Linear":
        m: nn.Module = nn.Linear(shape[-1], p["out_features"], bias=p["bias"])
    elif op in ("Conv2d", "Conv1d"):
        return _conv(op, p, shape[0])
    elif op == "ConvTranspose2d":
        m = nn.ConvTranspose2d(shape[0], p["out_channels"], p["kernel_size"], stride=p["stride"],
                               padding=p["padding"], output_padding=p["output_padding"], bias=p["bias"])
    elif op == "MaxPool2d":
        m = nn.MaxPool2d(p["kernel_size"], p["stride"] or p["kernel_size"], p["padding"], ceil_mode=p["ceil_mode"])
    elif op == "AvgPool2d":
        m = nn.AvgPool2d(p["kernel_size"], p["stride"] or p["kernel_size"], p["padding"], ceil_mode=p["ceil_mode"],
                         count_include_pad=p["count_include_pad"])
    elif op in ("BatchNorm1d", "BatchNorm2d"):
        m = getattr(nn, op)(shape[0], eps=p["eps"], momentum=p["momentum"], affine=p["affine"])
    elif op == "LayerNorm":
        m = nn.LayerNorm(shape[-1], eps=p["eps"], elementwise_affine=p["elementwise_affine"])
    elif op == "GroupNorm":
        m = nn.GroupNorm(p["num_groups"], shape[0], eps=p["eps"], affine=p["affine"])
    elif op == "Embedding":
        m = nn.Embedding(p["num_embeddings"], p["embedding_dim"])
    elif op == "PositionalEmbedding":
        m = PositionalEmbedding(shape)
    elif op in ("LSTM", "GRU"):
        return _recurrent(op, p, shape[-1])
    elif op == "PatchEmbed":  # ViT's patch embedding: a convolution whose kernel and stride are the patch
        conv = nn.Conv2d(shape[0], p["embed_dim"], p["patch_size"], stride=p["patch_size"], bias=p["bias"])
        return conv, lambda xs: conv(xs[0]).flatten(2).transpose(1, 2)
    elif op == "ClassToken":
        m = ClassToken(shape[-1])
    elif op == "MultiheadAttention":
        mha = nn.MultiheadAttention(shape[-1], p["num_heads"], dropout=p["dropout"], bias=p["bias"], batch_first=True)
        mask = torch.ones(shape[0], shape[0], dtype=torch.bool).triu(1) if p["causal"] else None
        return mha, lambda xs: mha(xs[0], xs[0], xs[0], need_weights=False, attn_mask=mask)[0]
    elif op == "TransformerEncoderLayer":
        act = partial(F.gelu, approximate="tanh") if p["activation"] == "gelu_tanh" else p["activation"]
        tel = nn.TransformerEncoderLayer(shape[-1], p["num_heads"], p["dim_feedforward"], p["dropout"], act,
                                         p["layer_norm_eps"], batch_first=True, norm_first=p["norm_first"])
        causal = nn.Transformer.generate_square_subsequent_mask(shape[0]) if p["causal"] else None
        return tel, lambda xs: tel(xs[0], src_mask=causal)
    else:
        return None
    return m, lambda xs: m(xs[0])


def _centre(x: torch.Tensor, size: list[int]) -> torch.Tensor:
    for axis, want in enumerate(size, start=2):
        x = x.narrow(axis, (x.shape[axis] - want) // 2, want)
    return x


def _functions(op: str, p: dict[str, Any]) -> Forward | None:
    """Weight-free ops that are no torch module (or whose parameters torch names differently)."""
    if op in ("Input", "Output"):
        return lambda xs: xs[0]
    if op == "GlobalAvgPool":
        return lambda xs: xs[0].mean(dim=tuple(range(2, xs[0].dim())))
    if op == "SequencePool":
        return lambda xs: (xs[0].mean(dim=1) if p["mode"] == "mean" else xs[0].amax(dim=1) if p["mode"] == "max"
                           else xs[0][:, 0])
    if op == "Upsample":  # the interpolation by torch's own function, not its module
        return lambda xs: F.interpolate(xs[0], scale_factor=tuple(float(v) for v in p["scale_factor"]), mode=p["mode"],
                                        align_corners=p["align_corners"] if p["mode"] == "bilinear" else None)
    if op == "Softmax":
        return lambda xs: F.softmax(xs[0], dim=_torch_dim(p["axis"]))
    if op == "HardSigmoid":
        return lambda xs: torch.clamp(xs[0] * p["alpha"] + p["beta"], 0.0, 1.0)
    if op == "Add":
        return lambda xs: torch.stack(xs).sum(dim=0)
    if op == "Concat":
        return lambda xs: torch.cat(xs, dim=_torch_dim(p["axis"]))
    if op == "CropConcat":  # every map cropped around its centre to the smallest, as U-Net's reference code does
        return lambda xs: torch.cat([_centre(x, [min(y.shape[a] for y in xs) for a in range(2, x.dim())]) for x in xs],
                                    dim=1)
    if op == "Reshape":
        return lambda xs: xs[0].reshape(xs[0].shape[0], *p["shape"])
    return None


def build(op: str, p: dict[str, Any], shapes: list[list[int]]) -> tuple[nn.Module | None, Forward]:
    """The torch layer of one node in eval mode: its module (None when it holds no weights) and its
    forward function."""
    fn = _functions(op, p)
    if fn is not None:
        return None, fn
    held = _modules(op, p, shapes[0])
    if held is not None:
        held[0].eval()
        return held
    cls = getattr(nn, op, None)
    if cls is None:
        raise SystemExit(f"reference: torch.nn has no {op}; describe the op in tests/mapping/torch_reference.py")
    m = cls(**p).eval()  # the catalogue names the op and its parameters as torch does
    return (m if any(True for _ in m.parameters()) else None), lambda xs: m(xs[0])


def load(module: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Canonical weights are torch's state dict: load them strictly (BatchNorm's batch counter aside)."""
    missing, unexpected = module.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"reference: canonical weights do not fit {type(module).__name__}: "
                         f"missing {missing}, unexpected {unexpected}")


def main(graph_path: str, weights_path: str, input_path: str, output_path: str) -> None:
    """The ``graph`` command: run a pipeline graph with canonical weights and save its output."""
    torch.manual_seed(0)
    graph = json.loads(open(graph_path, encoding="utf-8").read())
    arrays = dict(np.load(weights_path))
    x = torch.from_numpy(np.load(input_path))
    values: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for node in graph["layers"]:
            ins = [values[s] for s in node["inputs"]] if node["inputs"] else [x]
            module, forward = build(node["op"], node["params"], [list(t.shape[1:]) for t in ins])
            if module is not None:
                prefix = node["id"] + "/"
                load(module, {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})
            values[node["id"]] = forward(ins)
    np.save(output_path, values[graph["output"]].numpy())


def layers(cases_path: str) -> None:
    """The ``layers`` command: print the output shape and parameter count of one layer per case."""
    torch.manual_seed(0)
    out = []
    for case in json.loads(open(cases_path, encoding="utf-8").read()):
        module, forward = build(case["op"], case["params"], case["shapes"])
        if case["dtype"] == "int64":
            xs = [torch.randint(0, case["params"]["num_embeddings"], (2, *case["shapes"][0]))]
        else:
            xs = [torch.randn(2, *shape) for shape in case["shapes"]]
        with torch.no_grad():
            y = forward(xs)
        n_params = 0 if module is None else sum(t.numel() for t in module.parameters())
        out.append({"shape": list(y.shape[1:]), "params": n_params})
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1] == "graph":
        main(*sys.argv[2:6])
    elif sys.argv[1] == "layers":
        layers(sys.argv[2])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}; use 'graph' or 'layers'")
