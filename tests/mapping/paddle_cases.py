"""One-op graphs for the paddle mapper's tests, and a small torch-vs-paddle equivalence runner.

The runner generates the torch and the paddle ``model.py`` for each spec, then runs torch
and paddle in *separate* subprocesses (paddle after tensorflow in one process crashes, and
the portal never imports a framework): torch initialises the weights, draws inputs and
writes its eval-mode outputs to an .npz; paddle loads the same canonical weights, runs the
same inputs and reports the largest absolute difference per case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from core.codegen import generate
from core.spec import PipelineSpec

ROOT = Path(__file__).resolve().parents[2]

# (case name, op, params, input shape, input dtype)
ONE_OP: list[tuple[str, str, dict[str, Any], list[int], str]] = [
    ("linear", "Linear", {"out_features": 5}, [7], "float32"),
    ("linear_seq_nobias", "Linear", {"out_features": 3, "bias": False}, [4, 6], "float32"),
    ("conv2d", "Conv2d", {"out_channels": 4, "kernel_size": 3}, [3, 9, 8], "float32"),
    ("conv2d_strided_same", "Conv2d", {"out_channels": 4, "kernel_size": [3, 4], "stride": 2, "padding": "same"},
     [3, 9, 8], "float32"),
    ("conv2d_dilated_same", "Conv2d", {"out_channels": 4, "kernel_size": 3, "dilation": 2, "padding": "same"},
     [2, 9, 10], "float32"),
    ("conv2d_groups", "Conv2d", {"out_channels": 6, "kernel_size": 3, "groups": 3, "padding": [1, 2],
                                 "bias": False}, [3, 7, 7], "float32"),
    ("conv1d", "Conv1d", {"out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1}, [3, 11], "float32"),
    ("conv1d_same", "Conv1d", {"out_channels": 4, "kernel_size": 4, "stride": 2, "padding": "same"}, [3, 11],
     "float32"),
    ("conv_transpose2d", "ConvTranspose2d", {"out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1,
                                             "output_padding": 1}, [3, 5, 6], "float32"),
    ("maxpool_ceil", "MaxPool2d", {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True}, [2, 5, 7],
     "float32"),
    ("maxpool", "MaxPool2d", {"kernel_size": 3, "stride": 2}, [2, 9, 9], "float32"),
    ("avgpool_pad", "AvgPool2d", {"kernel_size": 3, "stride": 2, "padding": 1}, [2, 8, 9], "float32"),
    ("avgpool_ceil", "AvgPool2d", {"kernel_size": 3, "stride": 2, "ceil_mode": True}, [2, 8, 8], "float32"),
    ("adaptive_avgpool", "AdaptiveAvgPool2d", {"output_size": [3, 2]}, [2, 7, 9], "float32"),
    ("global_avgpool", "GlobalAvgPool", {}, [3, 5, 5], "float32"),
    ("global_avgpool_1d", "GlobalAvgPool", {}, [3, 5], "float32"),
    ("sequence_pool_max", "SequencePool", {"mode": "max"}, [6, 4], "float32"),
    ("sequence_pool_mean", "SequencePool", {"mode": "mean"}, [6, 4], "float32"),
    ("batchnorm2d", "BatchNorm2d", {"eps": 1e-3, "momentum": 0.2}, [3, 4, 4], "float32"),
    ("batchnorm1d", "BatchNorm1d", {}, [5], "float32"),
    ("batchnorm1d_signal_noaffine", "BatchNorm1d", {"affine": False}, [3, 6], "float32"),
    ("layernorm", "LayerNorm", {"eps": 1e-6}, [4, 6], "float32"),
    ("relu", "ReLU", {}, [10], "float32"),
    ("relu6", "ReLU6", {}, [10], "float32"),
    ("leaky_relu", "LeakyReLU", {"negative_slope": 0.2}, [10], "float32"),
    ("gelu", "GELU", {}, [10], "float32"),
    ("gelu_tanh", "GELU", {"approximate": "tanh"}, [10], "float32"),
    ("silu", "SiLU", {}, [10], "float32"),
    ("sigmoid", "Sigmoid", {}, [10], "float32"),
    ("tanh", "Tanh", {}, [10], "float32"),
    ("softmax", "Softmax", {"axis": 0}, [3, 4], "float32"),
    ("dropout", "Dropout", {"p": 0.3}, [10], "float32"),
    ("flatten", "Flatten", {}, [2, 3, 4], "float32"),
    ("reshape", "Reshape", {"shape": [4, -1]}, [2, 3, 4], "float32"),
    ("embedding", "Embedding", {"num_embeddings": 11, "embedding_dim": 4}, [6], "int64"),
    ("positional", "PositionalEmbedding", {}, [5, 4], "float32"),
    ("lstm", "LSTM", {"hidden_size": 4}, [5, 3], "float32"),
    ("lstm_bi_2layers_seq", "LSTM", {"hidden_size": 4, "num_layers": 2, "bidirectional": True,
                                     "return_sequences": True}, [5, 3], "float32"),
    ("gru_bi", "GRU", {"hidden_size": 4, "bidirectional": True}, [5, 3], "float32"),
    ("mha", "MultiheadAttention", {"num_heads": 2}, [5, 8], "float32"),
    ("mha_nobias", "MultiheadAttention", {"num_heads": 4, "bias": False}, [5, 8], "float32"),
    ("encoder", "TransformerEncoderLayer", {"num_heads": 2, "dim_feedforward": 16}, [5, 8], "float32"),
    ("encoder_prenorm_gelu", "TransformerEncoderLayer", {"num_heads": 2, "dim_feedforward": 16, "norm_first": True,
                                                         "activation": "gelu", "layer_norm_eps": 1e-6},
     [5, 8], "float32"),
]

# Ops with more than one input: (case name, op, params, input shapes)
MULTI_INPUT: list[tuple[str, str, dict[str, Any], list[list[int]]]] = [
    ("add", "Add", {}, [[3, 4], [3, 4]]),
    ("concat", "Concat", {"axis": 0}, [[2, 4], [3, 4]]),
    ("concat_last", "Concat", {"axis": -1}, [[2, 3], [2, 5]]),
]


def one_op_spec(name: str, op: str, params: dict[str, Any], shape: list[int], dtype: str) -> PipelineSpec:
    """Input(shape) → op → Output, on regression data so any output shape is accepted."""
    nodes = [{"id": "input", "op": "Input", "params": {"shape": shape, "dtype": dtype}},
             {"id": name, "op": op, "params": params},
             {"id": "output", "op": "Output", "params": {}}]
    edges = [{"source": "input", "target": name}, {"source": name, "target": "output"}]
    return _spec(name, nodes, edges, shape, dtype)


def multi_input_spec(name: str, op: str, params: dict[str, Any], shapes: list[list[int]]) -> PipelineSpec:
    """Input → Reshape/Linear branches of the given shapes → op → Output (one Input per graph)."""
    total = 1
    for dim in shapes[0]:
        total *= dim
    nodes: list[dict[str, Any]] = [{"id": "input", "op": "Input", "params": {"shape": [total], "dtype": "float32"}}]
    edges: list[dict[str, Any]] = []
    for i, shape in enumerate(shapes):
        size = 1
        for dim in shape:
            size *= dim
        nodes += [{"id": f"fc{i}", "op": "Linear", "params": {"out_features": size}},
                  {"id": f"branch{i}", "op": "Reshape", "params": {"shape": shape}}]
        edges += [{"source": "input", "target": f"fc{i}"}, {"source": f"fc{i}", "target": f"branch{i}"},
                  {"source": f"branch{i}", "target": name, "port": i}]
    nodes += [{"id": name, "op": op, "params": params}, {"id": "output", "op": "Output", "params": {}}]
    edges.append({"source": name, "target": "output"})
    return _spec(name, nodes, edges, [total], "float32")


def _spec(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]], shape: list[int],
          dtype: str) -> PipelineSpec:
    """An array (npz) data source of the Input's shape, regression so that any output shape is accepted."""
    data: dict[str, Any] = {"source": "data.npz", "task": "regression"}
    if dtype == "float32":  # (token ids come from a tokenize step; here the Input node declares them)
        data["input_shape"] = shape
    return PipelineSpec.model_validate({
        "name": name,
        "data": data,
        "model": {"nodes": nodes, "edges": edges},
        "training": {"loss": "mse"},
    })


def all_specs() -> dict[str, PipelineSpec]:
    specs = {case[0]: one_op_spec(*case) for case in ONE_OP}
    specs.update({case[0]: multi_input_spec(*case) for case in MULTI_INPUT})
    return specs


_TORCH = r"""
import importlib.util, json, sys
import numpy as np
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

root, train_steps = sys.argv[1], int(sys.argv[2])
cases = json.load(open(f"{root}/cases.json"))
for i, case in enumerate(cases):
    torch.manual_seed(i)
    m = load(f"{root}/{case}/torch/model.py", f"torch_model_{i}")
    model = m.build_model()
    weights = m.canonical_weights(model)
    rng = np.random.default_rng(i)
    shape = (4,) + tuple(m.INPUT_SHAPE)
    if m.INPUT_DTYPE == "int64":
        x = rng.integers(0, 11, size=shape).astype("int64")
    else:
        x = rng.standard_normal(shape).astype("float32")
    out = m.forward_numpy(model, x)
    # training-mode update of normalisation statistics (BatchNorm's running mean/variance)
    model.train()
    with torch.no_grad():
        for step in range(train_steps):
            model(torch.as_tensor(rng.standard_normal(shape).astype("float32") * 2 + 1)
                  if m.INPUT_DTYPE == "float32" else torch.as_tensor(x))
    after = m.canonical_weights(model)
    np.savez(f"{root}/{case}/torch.npz", x=x, out=out,
             **{"w:" + k: v for k, v in weights.items()}, **{"a:" + k: v for k, v in after.items()})
print("torch done")
"""

_PADDLE = r"""
import importlib.util, json, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import paddle

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

root, train_steps = sys.argv[1], int(sys.argv[2])
cases = json.load(open(f"{root}/cases.json"))
report = {}
for i, case in enumerate(cases):
    data = np.load(f"{root}/{case}/torch.npz")
    m = load(f"{root}/{case}/paddle/model.py", f"paddle_model_{i}")
    model = m.build_model()
    weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
    m.load_canonical_weights(model, weights)
    back = m.canonical_weights(model)
    roundtrip = max([float(np.abs(back[k] - weights[k]).max()) for k in weights] + [0.0])
    out = m.forward_numpy(model, data["x"])
    entry = {"roundtrip": roundtrip}
    if out.shape != data["out"].shape:
        entry["error"] = f"output shape {out.shape} != torch {data['out'].shape}"
    else:
        entry["max_abs_diff"] = float(np.abs(out - data["out"]).max()) if out.size else 0.0
    rng = np.random.default_rng(i)
    shape = (4,) + tuple(m.INPUT_SHAPE)
    if m.INPUT_DTYPE == "int64":
        x = rng.integers(0, 11, size=shape).astype("int64")
    else:
        x = rng.standard_normal(shape).astype("float32")
    model.train()
    with paddle.no_grad():
        for step in range(train_steps):
            model(paddle.to_tensor(rng.standard_normal(shape).astype("float32") * 2 + 1)
                  if m.INPUT_DTYPE == "float32" else paddle.to_tensor(x))
    after = m.canonical_weights(model)
    entry["after_train_diff"] = max([float(np.abs(after[k] - data["a:" + k]).max()) for k in after] + [0.0])
    report[case] = entry
print("REPORT " + json.dumps(report))
"""


def run_equivalence(specs: dict[str, PipelineSpec], root: Path, train_steps: int = 2,
                    timeout: float = 600) -> dict[str, dict[str, Any]]:
    """Generate both programs per spec under ``root`` and compare them; returns the paddle report."""
    root.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        generate(spec, "torch").write(root / name / "torch")
        generate(spec, "paddle").write(root / name / "paddle")
    (root / "cases.json").write_text(json.dumps(list(specs)))
    env = {**os.environ, "PYTHONPATH": "", "GLOG_minloglevel": "2"}
    for script in (_TORCH, _PADDLE):
        proc = subprocess.run([sys.executable, "-c", script, str(root), str(train_steps)], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=root)
        if proc.returncode != 0:
            raise AssertionError(f"framework subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                 f"{proc.stderr[-5000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])
