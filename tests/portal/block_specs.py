"""A small pipeline drawn with a composite block, for the editor's block tests (AppTest and browser):
a ``conv_relu`` block (3×3 convolution with ``channels`` outputs, then ReLU) used twice on the
built-in digits, then Flatten and Linear."""

from __future__ import annotations

import copy
import json
from typing import Any

_SPEC: dict[str, Any] = {
    "schema_version": 2,
    "name": "two_conv_blocks",
    "description": "Two uses of one block",
    "data": {"source": "sklearn:digits"},
    "model": {
        "blocks": [{
            "name": "conv_relu",
            "description": "3×3 convolution and ReLU",
            "inputs": ["x"],
            "params": [{"name": "channels", "type": "int", "default": 8}],
            "nodes": [
                {"id": "conv", "op": "Conv2d",
                 "params": {"out_channels": {"param": "channels"}, "kernel_size": 3, "padding": 1}},
                {"id": "relu", "op": "ReLU", "params": {}},
            ],
            "edges": [{"source": "x", "target": "conv"}, {"source": "conv", "target": "relu"}],
            "output": "relu",
        }],
        "nodes": [
            {"id": "input", "op": "Input", "params": {}},
            {"id": "stage1", "op": "conv_relu", "params": {"channels": 8}},
            {"id": "stage2", "op": "conv_relu", "params": {"channels": 16}},
            {"id": "flatten", "op": "Flatten", "params": {}},
            {"id": "head", "op": "Linear", "params": {"out_features": 10}},
            {"id": "output", "op": "Output", "params": {}},
        ],
        "edges": [{"source": a, "target": b} for a, b in [("input", "stage1"), ("stage1", "stage2"),
                                                         ("stage2", "flatten"), ("flatten", "head"),
                                                         ("head", "output")]],
    },
}

USES = ("stage1", "stage2")


def two_use_spec() -> dict[str, Any]:
    return copy.deepcopy(_SPEC)


def two_use_json() -> str:
    return json.dumps(_SPEC, indent=2)
