"""Shape inference and parameter counts of each op against PyTorch itself (the reference).

PyTorch runs in a subprocess (the portal's own process never imports a framework).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from core.ops import REGISTRY, Tensor

CASES: list[tuple[str, dict[str, Any], list[int]]] = [
    ("Linear", {"out_features": 7}, [5]),
    ("Linear", {"out_features": 3, "bias": False}, [4, 6]),
    ("Conv2d", {"out_channels": 8, "kernel_size": 3}, [3, 17, 13]),
    ("Conv2d", {"out_channels": 8, "kernel_size": [3, 5], "stride": 2, "padding": [1, 2]}, [3, 17, 13]),
    ("Conv2d", {"out_channels": 6, "kernel_size": 3, "dilation": 2, "groups": 3}, [3, 15, 15]),
    ("Conv2d", {"out_channels": 4, "kernel_size": 3, "padding": "same"}, [2, 9, 8]),
    ("Conv2d", {"out_channels": 4, "kernel_size": 3, "stride": 2, "padding": "same"}, [2, 9, 8]),
    ("Conv2d", {"out_channels": 4, "kernel_size": 2, "padding": "valid", "bias": False}, [2, 9, 8]),
    ("Conv1d", {"out_channels": 5, "kernel_size": 4, "stride": 2, "padding": 1}, [3, 21]),
    ("Conv1d", {"out_channels": 5, "kernel_size": 3, "padding": "same"}, [3, 20]),
    ("ConvTranspose2d", {"out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1},
     [3, 7, 5]),
    ("MaxPool2d", {"kernel_size": 3, "stride": 2}, [2, 15, 14]),
    ("MaxPool2d", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, [2, 15, 14]),
    ("MaxPool2d", {"kernel_size": 2, "ceil_mode": True}, [2, 7, 7]),
    ("AvgPool2d", {"kernel_size": 2}, [2, 9, 8]),
    ("AvgPool2d", {"kernel_size": 3, "stride": 1, "padding": 1}, [2, 9, 8]),
    ("AdaptiveAvgPool2d", {"output_size": [3, 2]}, [4, 9, 8]),
    ("BatchNorm1d", {}, [6]),
    ("BatchNorm1d", {"affine": False}, [6, 5]),
    ("BatchNorm2d", {}, [3, 4, 4]),
    ("LayerNorm", {}, [5, 8]),
    ("Embedding", {"num_embeddings": 50, "embedding_dim": 6}, [9]),
    ("LSTM", {"hidden_size": 7}, [5, 3]),
    ("LSTM", {"hidden_size": 4, "num_layers": 2, "bidirectional": True, "return_sequences": True}, [5, 3]),
    ("GRU", {"hidden_size": 6, "num_layers": 2}, [4, 3]),
    ("GRU", {"hidden_size": 3, "bidirectional": True, "return_sequences": True}, [4, 5]),
    ("MultiheadAttention", {"num_heads": 2}, [5, 8]),
    ("TransformerEncoderLayer", {"num_heads": 2, "dim_feedforward": 16}, [5, 8]),
    ("Flatten", {}, [3, 4, 5]),
]

SCRIPT = r"""
import json, sys, torch
from torch import nn
cases = json.load(sys.stdin)
out = []
for op, p, shape in cases:
    x = torch.randn(2, *shape)
    if op == "Linear":
        m = nn.Linear(shape[-1], p["out_features"], bias=p.get("bias", True))
    elif op in ("Conv2d", "Conv1d"):
        cls = nn.Conv2d if op == "Conv2d" else nn.Conv1d
        if p.get("padding") != "same" or p.get("stride", 1) == 1:
            m = cls(shape[0], p["out_channels"], p["kernel_size"], stride=p.get("stride", 1),
                    padding=p.get("padding", 0), dilation=p.get("dilation", 1), groups=p.get("groups", 1),
                    bias=p.get("bias", True))
        else:  # torch refuses 'same' with a stride: pad like TF (odd pixel at the end)
            k, s = p["kernel_size"], p["stride"]
            pads = []
            for n in reversed(shape[1:]):
                total = max((-(-n // s) - 1) * s + k - n, 0)
                pads += [total // 2, total - total // 2]
            m = cls(shape[0], p["out_channels"], k, stride=s, bias=p.get("bias", True))
            x = torch.nn.functional.pad(x, pads)
    elif op == "ConvTranspose2d":
        m = nn.ConvTranspose2d(shape[0], p["out_channels"], p["kernel_size"], stride=p["stride"],
                               padding=p["padding"], output_padding=p["output_padding"])
    elif op in ("MaxPool2d", "AvgPool2d"):
        m = getattr(nn, op)(p["kernel_size"], stride=p.get("stride"), padding=p.get("padding", 0),
                            ceil_mode=p.get("ceil_mode", False))
    elif op == "AdaptiveAvgPool2d":
        m = nn.AdaptiveAvgPool2d(p["output_size"])
    elif op in ("BatchNorm1d", "BatchNorm2d"):
        m = getattr(nn, op)(shape[0], affine=p.get("affine", True))
    elif op == "LayerNorm":
        m = nn.LayerNorm(shape[-1])
    elif op == "Embedding":
        m = nn.Embedding(p["num_embeddings"], p["embedding_dim"])
        x = torch.randint(0, p["num_embeddings"], (2, *shape))
    elif op in ("LSTM", "GRU"):
        m = getattr(nn, op)(shape[1], p["hidden_size"], num_layers=p.get("num_layers", 1),
                            bidirectional=p.get("bidirectional", False), batch_first=True)
    elif op == "MultiheadAttention":
        m = nn.MultiheadAttention(shape[1], p["num_heads"], batch_first=True)
    elif op == "TransformerEncoderLayer":
        m = nn.TransformerEncoderLayer(shape[1], p["num_heads"], p["dim_feedforward"], batch_first=True)
    elif op == "Flatten":
        m = nn.Flatten()
    m.eval()
    with torch.no_grad():
        if op == "MultiheadAttention":
            y = m(x, x, x, need_weights=False)[0]
        elif op in ("LSTM", "GRU"):
            seq, h = m(x)
            h = h[0] if op == "LSTM" else h
            y = seq if p.get("return_sequences") else (torch.cat([h[-2], h[-1]], -1) if p.get("bidirectional") else h[-1])
        else:
            y = m(x)
    out.append({"shape": list(y.shape[1:]), "params": sum(t.numel() for t in m.parameters())})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def torch_results() -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps(CASES), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def infer(op: str, params: dict[str, Any], shape: list[int]) -> tuple[Tensor, int]:
    cls = REGISTRY.get(op)
    p = {prm.name: prm.check(params.get(prm.name, prm.default)) for prm in cls.params}
    dtype = "int64" if op == "Embedding" else "float32"
    ins = [Tensor(tuple(shape), dtype)]
    out = cls.infer(ins, p)
    return out, cls.count_params(ins, p, out)


@pytest.mark.frameworks
@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_shape_and_params_match_torch(index: int, torch_results: list[dict[str, Any]]) -> None:
    op, params, shape = CASES[index]
    out, n_params = infer(op, params, shape)
    assert list(out.shape) == torch_results[index]["shape"]
    assert n_params == torch_results[index]["params"]
