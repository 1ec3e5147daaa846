"""FlowTrain's own self-attention pattern recognised back into MultiheadAttention.

The export (:mod:`core.onnx_export.attention`) writes attention as q, k and v projections (MatMul by a
constant, Add of a bias), each Reshape (N, T, heads, d) and Transpose (q and v [0, 2, 1, 3], k [0, 2, 3, 1]),
MatMul(q, k), Mul by 1/√d, optionally Add of the causal mask (−∞ above the diagonal), Softmax over the last
axis, MatMul by v, Transpose [0, 2, 1, 3], Reshape (N, T, E), and the output projection. The walk cannot
import these pieces one by one (the catalogue has no op for a head split), so before it every Softmax is
tried as the middle of that pattern; a match (every piece a constant from the initialisers, every tensor
between them read by the pattern only) is imported as one MultiheadAttention with torch's packed weights.
Anything else is left to the walk, which refuses what it cannot express, naming the node.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import NodeProto

from core.onnx_import._patterns import Fused, PatternGraph, attr


def _projection(g: PatternGraph, tensor: str, used: list[int]) -> tuple[str, np.ndarray, np.ndarray | None] | None:
    """``tensor`` = x·W (+ b): (x, W, b)."""
    bias = None
    add = g.node(tensor, "Add")
    if add is not None:
        split = g.split(add[1])
        if split is None:
            return None
        used.append(add[0])
        tensor, bias = split
    mm = g.node(tensor, "MatMul")
    split = g.split(mm[1]) if mm is not None else None
    if mm is None or split is None or g.consts.get(mm[1].input[1]) is None or split[1].ndim != 2:
        return None
    used.append(mm[0])
    return split[0], split[1], bias


def _heads(g: PatternGraph, tensor: str, perm: list[int], used: list[int]) -> tuple[str, np.ndarray, np.ndarray | None,
                                                                              int] | None:
    """A projection split into heads: Reshape [0, 0, h, d] → Transpose ``perm``; (x, W, b, h)."""
    tr = g.node(tensor, "Transpose")
    if tr is None or list(attr(tr[1], "perm", [])) != perm:
        return None
    rs = g.node(tr[1].input[0], "Reshape")
    shape = g.consts.get(rs[1].input[1]) if rs is not None else None
    if rs is None or shape is None or shape.size != 4 or list(shape[:2]) != [0, 0]:
        return None
    used += [tr[0], rs[0]]
    proj = _projection(g, rs[1].input[0], used)
    return None if proj is None else (*proj, int(shape[2]))


def match_attention(g: PatternGraph, s_index: int) -> Fused | None:
    """The attention block around the Softmax at ``s_index`` (see the module doc), else None."""
    softmax = g.nodes[s_index]
    used = [s_index]
    if attr(softmax, "axis", -1) not in (-1, 3):
        return None
    scores, mask = softmax.input[0], None
    add = g.node(scores, "Add")
    if add is not None:
        split = g.split(add[1])
        if split is None:
            return None
        used.append(add[0])
        scores, mask = split
    mul = g.node(scores, "Mul")
    split = g.split(mul[1]) if mul is not None else None
    if mul is None or split is None or split[1].size != 1:
        return None
    used.append(mul[0])
    qk = g.node(split[0], "MatMul")
    if qk is None:
        return None
    used.append(qk[0])
    q, k = _heads(g, qk[1].input[0], [0, 2, 1, 3], used), _heads(g, qk[1].input[1], [0, 2, 3, 1], used)
    readers = g.consumers.get(softmax.output[0], [])
    if q is None or k is None or len(readers) != 1 or g.nodes[readers[0]].op_type != "MatMul" \
            or g.nodes[readers[0]].input[0] != softmax.output[0]:
        return None
    av = readers[0]
    used.append(av)
    v = _heads(g, g.nodes[av].input[1], [0, 2, 1, 3], used)
    if v is None:
        return None
    # the heads joined: Transpose [0, 2, 1, 3] → Reshape [0, 0, E] → out projection
    out = g.nodes[av].output[0]
    chain = []
    for op_type in ("Transpose", "Reshape", "MatMul"):
        nxt = g.consumers.get(out, [])
        if len(nxt) != 1 or g.nodes[nxt[0]].op_type != op_type or g.nodes[nxt[0]].input[0] != out:
            return None
        chain.append(nxt[0])
        out = g.nodes[nxt[0]].output[0]
    tr, rs, mm = (g.nodes[i] for i in chain)
    target = g.consts.get(rs.input[1])
    wo = g.consts.get(mm.input[1])
    if list(attr(tr, "perm", [])) != [0, 2, 1, 3] or target is None or target.size != 3 or wo is None:
        return None
    used += chain
    bo = None
    after = g.consumers.get(out, [])
    if len(after) == 1 and g.nodes[after[0]].op_type == "Add":
        split = g.split(g.nodes[after[0]])
        if split is not None and split[0] == out and split[1].shape == (wo.shape[1],):
            used.append(after[0])
            bo, out = split[1], g.nodes[after[0]].output[0]
    (xq, wq, bq, heads), (xk, wk, bk, hk), (xv, wv, bv, hv) = q, k, v
    width = wq.shape[0]
    biases = [b for b in (bq, bk, bv, bo) if b is not None]
    if not xq == xk == xv or not heads == hk == hv or width % heads or len(biases) not in (0, 4) \
            or any(w.shape != (width, width) for w in (wq, wk, wv, wo)) or list(target) != [0, 0, width] \
            or not np.isclose(_scale(g, mul[1]), 1 / math.sqrt(width // heads), rtol=1e-6):
        return None
    causal = mask is not None
    if causal and not _is_causal(mask):  # type: ignore[arg-type]
        return None
    inside = {o for i in used for o in g.nodes[i].output} - {out}
    if any(g.readers[t] != 1 for t in inside if g.nodes[g.producer[t]].op_type != "Softmax") \
            or g.readers[softmax.output[0]] != 1:
        return None
    weights = {"in_proj_weight": np.concatenate([wq.T, wk.T, wv.T]).astype(np.float32),
               "out_proj.weight": wo.T.astype(np.float32)}
    if biases:
        weights["in_proj_bias"] = np.concatenate([bq, bk, bv]).astype(np.float32)  # type: ignore[list-item]
        weights["out_proj.bias"] = bo.astype(np.float32)  # type: ignore[union-attr]
    params = {"num_heads": heads, "bias": bool(biases), "causal": causal}
    hint = g.nodes[min(used)].name.split("/")[0] or "attention"
    return Fused("MultiheadAttention", xq, max(used), out, hint, params, weights, frozenset(used))


def _scale(g: PatternGraph, mul: NodeProto) -> float:
    """The constant the scores are multiplied by (1/√d in FlowTrain's export)."""
    split = g.split(mul)
    return float(np.asarray(split[1]).reshape(-1)[0]) if split is not None else math.nan


def _is_causal(mask: np.ndarray) -> bool:
    steps = mask.shape[-1]
    if mask.size != steps * steps:
        return False
    return bool(np.array_equal(mask.reshape(steps, steps), np.triu(np.full((steps, steps), -np.inf), 1)))
