"""Published CNNs for the ONNX import tests: the ``light_*`` models the ``onnx`` package ships in its
backend test data (AlexNet, GoogLeNet, ResNet-50, SqueezeNet, VGG-19, ZFNet, DenseNet-121, ...).

They ship without weights: each weight is a ``ConstantOfShape`` placeholder. :func:`with_random_weights`
replaces every placeholder by seeded random values of moderate size, chosen by where the graph uses
it: He-uniform kernels and matrices (ReLU networks without BatchNorm keep activations of order one
through 19 layers); a BatchNormalization's scale U(0.5, 1), shift and mean U(±0.1), variance U(1, 2)
(so that 50 residual blocks do not blow the activations up); other vectors (biases, the per-channel
Mul/Add constants) U(0.5, 1.5).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, helper, numpy_helper

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def published(name: str) -> Path:
    path = LIGHT / f"light_{name}.onnx"
    assert path.is_file(), f"the onnx package no longer ships {path}"
    return path


def with_random_weights(model: ModelProto, seed: int = 0) -> ModelProto:
    """A copy of ``model`` whose ConstantOfShape weight placeholders are random initialisers."""
    rng = np.random.default_rng(seed)
    out = ModelProto()
    out.CopyFrom(model)
    inits = {i.name: numpy_helper.to_array(i) for i in out.graph.initializer}
    role = {name: (n.op_type, i) for n in out.graph.node for i, name in enumerate(n.input)}
    kept = []
    for node in out.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            array = _draw(rng, shape, role.get(node.output[0], ("", 0)))
            out.graph.initializer.append(numpy_helper.from_array(array, node.output[0]))
        else:
            kept.append(node)
    del out.graph.node[:]
    out.graph.node.extend(kept)
    used = {i for n in kept for i in n.input}
    weights = [i for i in out.graph.initializer if i.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(weights)
    images = [i for i in out.graph.input if i.name not in inits and i.name in used]  # IR 3 lists weights too
    del out.graph.input[:]
    out.graph.input.extend(images)
    return out


BATCH_NORM_RANGES = {1: (0.5, 1.0), 2: (-0.1, 0.1), 3: (-0.1, 0.1), 4: (1.0, 2.0)}  # scale, B, mean, var


def _draw(rng: np.random.Generator, shape: tuple[int, ...], role: tuple[str, int]) -> np.ndarray:
    if role[0] == "BatchNormalization":
        return rng.uniform(*BATCH_NORM_RANGES[role[1]], shape).astype(np.float32)
    if len(shape) == 1:
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    fan_in = math.prod(shape[1:])
    bound = math.sqrt(6.0 / fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def with_output(model: ModelProto, tensor: str) -> ModelProto:
    """``model`` with ``tensor`` as its only output (the logits before a Softmax the import left to the loss)."""
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.output[:]
    out.graph.output.append(helper.make_tensor_value_info(tensor, onnx.TensorProto.FLOAT, None))
    return out


def gemm_model(weight: np.ndarray | None = None) -> ModelProto:
    """x (1, 4) → Gemm by ``w`` (2, 4): the smallest model whose one weight is an initialiser."""
    w = numpy_helper.from_array(np.ones((2, 4), np.float32) if weight is None else weight, "w")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def with_external_weight(model: ModelProto, location: str, offset: int = 0) -> ModelProto:
    """``model`` whose first initialiser says its 32 bytes lie in the file ``location`` (from ``offset``)."""
    out = ModelProto()
    out.CopyFrom(model)
    w = out.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": str(offset), "length": "32"}.items():
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return out
