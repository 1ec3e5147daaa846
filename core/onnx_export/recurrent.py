"""LSTM and GRU: one ONNX LSTM/GRU per layer (both directions in one node), sequence-major as
ONNX's default layout wants (a Transpose in and out). Torch's gate blocks are reordered into
ONNX's: LSTM i,f,g,o → i,o,f,c; GRU r,z,n → z,r,h (``linear_before_reset=1`` is torch's GRU).

Without ``return_sequences`` the node yields the last layer's final hidden state Y_h, both
directions joined: the forward direction's last step and the backward direction's first step,
which is what every generated program returns."""

from __future__ import annotations

import numpy as np

from core.onnx_export._graph import ExportContext, exports

# ONNX gate block i takes torch's block ORDER[op][i].
ORDER = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2)}


def _gates(array: np.ndarray, op: str) -> np.ndarray:
    blocks = np.split(array, len(ORDER[op]), axis=0)
    return np.concatenate([blocks[i] for i in ORDER[op]], axis=0)


def _layer_weights(ctx: ExportContext, layer: int) -> tuple[str, str, str]:
    """W [dirs, gates·H, in], R [dirs, gates·H, H] and B [dirs, 2·gates·H] of one layer, in ONNX's order."""
    op, w = ctx.node.op, ctx.weights
    suffixes = ("", "_reverse") if ctx.params["bidirectional"] else ("",)
    names = [f"l{layer}{s}" for s in suffixes]
    ws = np.stack([_gates(w[f"weight_ih_{n}"], op) for n in names])
    rs = np.stack([_gates(w[f"weight_hh_{n}"], op) for n in names])
    bs = np.stack([np.concatenate([_gates(w[f"bias_ih_{n}"], op), _gates(w[f"bias_hh_{n}"], op)]) for n in names])
    return ctx.const(f"W_l{layer}", ws), ctx.const(f"R_l{layer}", rs), ctx.const(f"B_l{layer}", bs)


@exports("LSTM", "GRU")
def recurrent(ctx: ExportContext) -> str:
    p, op = ctx.params, ctx.node.op
    direction = "bidirectional" if p["bidirectional"] else "forward"
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    x = ctx.op("Transpose", ctx.inputs, perm=[1, 0, 2])  # (T, N, F)
    state = x
    for layer in range(p["num_layers"]):
        if layer:  # (T, dirs, N, H) → (T, N, dirs·H): the next layer's input
            x = ctx.reshape(ctx.op("Transpose", [x], perm=[0, 2, 1, 3]), [0, 0, -1])
        x, state = ctx.op_outputs(op, [x, *_layer_weights(ctx, layer)], 2, f"{ctx.node.id}/{op}_l{layer}",
                                  hidden_size=p["hidden_size"], direction=direction, **extra)
    if p["return_sequences"]:  # Y (T, dirs, N, H) → (N, T, dirs·H)
        return ctx.reshape(ctx.op("Transpose", [x], perm=[2, 0, 1, 3]), [0, 0, -1], ctx.out)
    return ctx.reshape(ctx.op("Transpose", [state], perm=[1, 0, 2]), [0, -1], ctx.out)  # Y_h (dirs, N, H)
