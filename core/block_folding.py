"""Fold repeated structure of a flat graph into composite blocks (an imported model's dense layers,
bottlenecks, Inception modules), so that a 429-node DenseNet opens as about 20 nodes.

The graph is cut into *segments* at its cut nodes: a node every path from the input to the output
passes through (in a topological order, no edge jumps over it). A segment is what lies after one cut
up to the next one included, so it has one input (the cut before it) and one output (its last node):
exactly a block's shape. Consecutive segments form candidate *units*; two units are alike when their
nodes, in their topological order, have the same ops, the same parameter names, the same kinds of
values and the same edges (ports included). Values that differ between alike units become the
block's parameters (``{"param": NAME}``, :mod:`core.block_expansion`); equal ones stay literal.

Greedily, the unit that saves the most nodes on the canvas (``count × (size − 1) − size``, the block's
definition counted once) is folded first, its occurrences taken left to right without overlap; a
unit that is a repetition of a shorter one (two dense layers) is skipped, since the shorter one and
the run folding below give fewer nodes. Then a run of two or more consecutive uses of one block
with equal parameters (a DenseNet dense block, a ResNet stage after its first block) becomes one
use of a block holding the run (``NAME_x6``), alike runs sharing it.

Weights keep their values and move to the expanded ids (``layer1__conv1/weight``): :attr:`Folded.renamed`
maps every old node id to its new expanded id. The folded graph expands back to the same function
(same ops, params, edges and ports), so parameter counts and generated programs' outputs are unchanged.
Pure: no framework, no I/O.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from core.block_expansion import flat_id

MIN_UNIT_NODES = 3  # a smaller repeat (conv → relu) reads better unfolded
MAX_UNIT_SEGMENTS = 6
NO_FOLD_OPS = frozenset({"Input", "Output"})  # a block holds neither

_ABBREVIATIONS = {"Conv2d": "conv", "Conv1d": "conv", "BatchNorm2d": "bn", "BatchNorm1d": "bn", "ReLU": "relu",
                  "MaxPool2d": "maxpool", "AvgPool2d": "avgpool", "Linear": "linear", "Concat": "cat",
                  "Add": "add", "Dropout": "dropout", "LocalResponseNorm": "lrn"}


@dataclass
class Folded:
    """The folded graph (spec-shaped dicts) and where every old node id went after expansion."""

    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    blocks: list[dict[str, Any]] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # old node id -> expanded id (unchanged ids absent)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "ints"
    return "fixed:" + repr(value)  # not a block parameter's type: alike only when equal


def _abbrev(op: str) -> str:
    return _ABBREVIATIONS.get(op, re.sub(r"[^a-z0-9]", "", op.lower()) or "node")


def _topological(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> list[str] | None:
    """The node ids in a topological order that keeps the given order where it can; None on a cycle."""
    ids = [n["id"] for n in nodes]
    index = {i: k for k, i in enumerate(ids)}
    indeg = Counter(e["target"] for e in edges)
    succ: dict[str, list[str]] = {i: [] for i in ids}
    for e in edges:
        succ[e["source"]].append(e["target"])
    ready = sorted(index[i] for i in ids if indeg[i] == 0)
    order: list[str] = []
    heapq.heapify(ready)
    while ready:
        n = ids[heapq.heappop(ready)]
        order.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                heapq.heappush(ready, index[m])
    return order if len(order) == len(ids) else None


class _Graph:
    def __init__(self, nodes: list[dict[str, Any]], edges: list[dict[str, Any]], order: list[str]) -> None:
        self.node = {n["id"]: n for n in nodes}
        self.edges = edges
        self.order = order
        self.pos = {i: k for k, i in enumerate(order)}
        self.ins: dict[str, list[dict[str, Any]]] = {i: [] for i in order}
        self.outs: dict[str, list[dict[str, Any]]] = {i: [] for i in order}
        for e in edges:
            self.ins[e["target"]].append(e)
            self.outs[e["source"]].append(e)

    def segments(self) -> list[list[str]]:
        """The graph cut at its cut nodes: each segment ends at a cut; the first is the first node alone."""
        segments: list[list[str]] = []
        current: list[str] = []
        reach = -1  # the furthest position an edge from before the current node lands on
        for k, node in enumerate(self.order):
            current.append(node)
            if reach <= k:
                segments.append(current)
                current = []
            for e in self.outs[node]:
                reach = max(reach, self.pos[e["target"]])
        if current:
            segments.append(current)
        return segments

    def foldable(self, members: list[str]) -> bool:
        """A unit a block can hold: no Input/Output, every node fed from inside or the cut, none a dead end."""
        inside = set(members)
        for node in members:
            if self.node[node]["op"] in NO_FOLD_OPS or not self.ins[node]:
                return False
            if node != members[-1] and not any(e["target"] in inside for e in self.outs[node]):
                return False
        return True

    def signature(self, members: list[str]) -> tuple[Any, ...]:
        """What two alike units share: ops, parameter names and kinds, edges with ports, by topological position."""
        local = {n: k for k, n in enumerate(members)}
        sig = []
        for node in members:
            spec = self.node[node]
            params = tuple(sorted((key, _kind(v)) for key, v in spec.get("params", {}).items()))
            ins = tuple(sorted((local.get(e["source"], -1), e.get("port") if e.get("port") is not None else -1)
                               for e in self.ins[node]))
            sig.append((spec["op"], params, ins))
        return tuple(sig)


def _periodic(seq: tuple[Any, ...]) -> bool:
    """Whether ``seq`` repeats a shorter sequence (a unit of two dense layers)."""
    n = len(seq)
    return any(n % p == 0 and seq == seq[:p] * (n // p) for p in range(1, n))


def _occurrences(sigs: list[Any], free: list[bool], start: int, length: int) -> list[int]:
    """Non-overlapping starts of the unit sigs[start:start+length] among the free segments, left to right."""
    target = sigs[start:start + length]
    found, k = [], 0
    while k + length <= len(sigs):
        if all(free[k:k + length]) and sigs[k:k + length] == target:
            found.append(k)
            k += length
        else:
            k += 1
    return found


def _best_unit(sigs: list[Any], sizes: list[int], free: list[bool]) -> tuple[int, list[int]] | None:
    """The unit (its length and starts) saving the most nodes, or None when no unit saves any."""
    best: tuple[tuple[int, int, int, int], int, list[int]] | None = None
    seen: set[Any] = set()
    for length in range(1, MAX_UNIT_SEGMENTS + 1):
        for start in range(len(sigs) - length + 1):
            if not all(free[start:start + length]):
                continue
            key = tuple(sigs[start:start + length])
            if key in seen or _periodic(key):
                continue
            seen.add(key)
            size = sum(sizes[start:start + length])
            if size < MIN_UNIT_NODES:
                continue
            starts = _occurrences(sigs, free, start, length)
            saved = len(starts) * (size - 1) - size
            if len(starts) < 2 or saved <= 0:
                continue
            # ties: the unit that starts with its biggest segment (a block begins with its branches), shorter, earlier
            rank = (saved, sizes[start], -length, -start)
            if best is None or rank > best[0]:
                best = (rank, length, starts)
    return None if best is None else (best[1], best[2])


class _Folder:
    def __init__(self, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> None:
        self.nodes = nodes
        self.edges = edges
        self.blocks: list[dict[str, Any]] = []
        self.renamed: dict[str, str] = {}
        self.names: set[str] = set()
        self.ids = {n["id"] for n in nodes}

    def _name(self, base: str, taken: set[str]) -> str:
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    def _block_name(self, g: _Graph, first: list[str]) -> str:
        """A name saying what the unit is: a residual block, a dense layer, an Inception-like module, or its ops."""
        ops = [g.node[n]["op"] for n in first]
        port_fed = {e["target"] for n in first for e in g.ins[n] if e["source"] not in first}
        merges = [n for n in first if g.node[n]["op"] in ("Add", "Concat")]
        if not merges:
            base = "_".join(_abbrev(op) for op in ops) if len(ops) <= 4 else "chain"
        elif g.node[merges[-1]]["op"] == "Add":
            base = "residual" if merges[-1] in port_fed else "residual_proj"
        elif merges[-1] in port_fed:
            base = "dense_layer"  # the input is concatenated to what the layer computes
        else:
            base = "module" if len(g.ins[merges[-1]]) > 2 else "concat"
        return self._name(base, self.names)

    def fold_units(self) -> None:
        """Fold the repeated units of the current graph into blocks, the most nodes saved first."""
        order = _topological(self.nodes, self.edges)
        if order is None:
            return
        g = _Graph(self.nodes, self.edges, order)
        segments = g.segments()
        sigs: list[Any] = [g.signature(s) if g.foldable(s) else ("unfoldable", k) for k, s in enumerate(segments)]
        sizes = [len(s) for s in segments]
        free = [sig[0] != "unfoldable" for sig in sigs]
        groups: list[list[list[str]]] = []
        while (found := _best_unit(sigs, sizes, free)) is not None:
            length, starts = found
            units = []
            for s in starts:
                units.append([n for seg in segments[s:s + length] for n in seg])
                for k in range(s, s + length):
                    free[k] = False
            groups.append(units)
        for units in groups:
            self._make_block(g, units)

    def _make_block(self, g: _Graph, units: list[list[str]]) -> None:
        first = units[0]
        ops = [g.node[n]["op"] for n in first]
        name = self._block_name(g, first)
        counts: Counter[str] = Counter()
        inner = []
        for op in ops:
            counts[_abbrev(op)] += 1
            inner.append(f"{_abbrev(op)}{counts[_abbrev(op)]}")
        params: list[dict[str, Any]] = []
        bound: list[tuple[str, int, str]] = []  # (block parameter, position in the unit, node parameter)
        block_nodes = []
        for j, node in enumerate(first):
            values = {}
            for key, value in g.node[node].get("params", {}).items():
                column = [g.node[u[j]]["params"][key] for u in units]
                if all(v == value for v in column) or _kind(value).startswith("fixed:"):
                    values[key] = value
                else:
                    pname = f"{inner[j]}_{key}"
                    params.append({"name": pname, "type": _kind(value), "default": value})
                    bound.append((pname, j, key))
                    values[key] = {"param": pname}
            block_nodes.append({"id": inner[j], "op": ops[j], "params": values})
        local = {n: inner[j] for j, n in enumerate(first)}
        block_edges = []
        for node in first:
            for e in g.ins[node]:
                edge = {"source": local.get(e["source"], "x"), "target": local[node]}
                if e.get("port") is not None:
                    edge["port"] = e["port"]
                block_edges.append(edge)
        self.blocks.append({"name": name, "description": f"folded on import: {len(units)} alike units of "
                            f"{len(first)} nodes ({', '.join(dict.fromkeys(ops))})",
                            "inputs": ["x"], "params": params, "nodes": block_nodes, "edges": block_edges,
                            "output": inner[-1]})
        for k, unit in enumerate(units):
            use = self._name(f"{name}_{k + 1}", self.ids)
            use_params = {pname: g.node[unit[j]]["params"][key] for pname, j, key in bound}
            self._replace(unit, use, name, use_params, {n: inner[j] for j, n in enumerate(unit)})

    def _replace(self, unit: list[str], use: str, block: str, use_params: dict[str, Any],
                 inner_of: dict[str, str]) -> None:
        """Put one use of ``block`` where ``unit``'s nodes were; their weights move under the use."""
        members = set(unit)
        at = next(k for k, n in enumerate(self.nodes) if n["id"] == unit[0])
        self.nodes = [n for n in self.nodes if n["id"] not in members]
        self.nodes.insert(at, {"id": use, "op": block, "params": use_params})
        edges = []
        for e in self.edges:
            src_in, dst_in = e["source"] in members, e["target"] in members
            if src_in and dst_in:
                continue
            if dst_in:
                edges.append({"source": e["source"], "target": use})  # the one input port
            elif src_in:
                edges.append({**e, "source": use})
            else:
                edges.append(e)
        self.edges = _dedupe(edges)
        for old, local in inner_of.items():
            self._move(old, flat_id(use, local))

    def _move(self, old: str, new: str) -> None:
        """Node ``old`` (an id of the original graph, or one already folded) now expands under ``new``."""
        moved = False
        for original, current in list(self.renamed.items()):
            if current == old or current.startswith(old + "__"):
                self.renamed[original] = new + current[len(old):]
                moved = True
        if not moved:
            self.renamed[old] = new

    def fold_runs(self) -> None:
        """A run of ≥ 2 consecutive uses of one block with equal parameters becomes one use of a run block."""
        order = _topological(self.nodes, self.edges)
        if order is None:
            return
        g = _Graph(self.nodes, self.edges, order)
        blocks = {b["name"]: b for b in self.blocks}
        runs: list[list[str]] = []
        current: list[str] = []
        for seg in g.segments():
            node = g.node[seg[0]]
            alike = (len(seg) == 1 and node["op"] in blocks and len(g.ins[seg[0]]) == 1 and current
                     and g.node[current[-1]]["op"] == node["op"] and g.node[current[-1]]["params"] == node["params"])
            if alike:
                current.append(seg[0])
                continue
            if len(current) >= 2:
                runs.append(current)
            current = [seg[0]] if len(seg) == 1 and node["op"] in blocks and len(g.ins[seg[0]]) == 1 else []
        if len(current) >= 2:
            runs.append(current)
        by_kind: dict[tuple[str, int], list[list[str]]] = {}
        for run in runs:
            by_kind.setdefault((g.node[run[0]]["op"], len(run)), []).append(run)
        for (block, length), group in by_kind.items():
            self._make_run_block(g, blocks[block], length, group)

    def _make_run_block(self, g: _Graph, inner: dict[str, Any], length: int, runs: list[list[str]]) -> None:
        name = self._name(f"{inner['name']}_x{length}", self.names)
        first = g.node[runs[0][0]]["params"]
        varying = [p for p in inner["params"]
                   if any(g.node[r[0]]["params"].get(p["name"]) != first.get(p["name"]) for r in runs)]
        params = [{**p, "default": first.get(p["name"], p["default"])} for p in varying]
        use_params = {k: v for k, v in first.items() if k not in {p["name"] for p in varying}}
        for p in varying:
            use_params[p["name"]] = {"param": p["name"]}
        ids = [f"{inner['name']}_{k + 1}" for k in range(length)]
        nodes = [{"id": i, "op": inner["name"], "params": dict(use_params)} for i in ids]
        edges = [{"source": "x", "target": ids[0]}] + [{"source": a, "target": b} for a, b in zip(ids, ids[1:])]
        self.blocks.append({"name": name, "description": f"{length} {inner['name']} in a row", "inputs": ["x"],
                            "params": params, "nodes": nodes, "edges": edges, "output": ids[-1]})
        for k, run in enumerate(runs):
            use = self._name(f"{name}_{k + 1}" if len(runs) > 1 else name, self.ids)
            values = {p["name"]: g.node[run[0]]["params"][p["name"]] for p in varying}
            self._replace(run, use, name, values, dict(zip(run, ids)))


def _dedupe(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Edges into a use from one source (several inner nodes read the port) become one edge."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for e in edges:
        key = (e["source"], e["target"], e.get("port"))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def fold_repeats(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> Folded:
    """Fold ``nodes``/``edges`` (a flat graph, spec-shaped dicts) as the module docstring says.

    A graph with nothing repeated comes back unchanged (no blocks, nothing renamed).
    """
    folder = _Folder([dict(n) for n in nodes], [dict(e) for e in edges])
    folder.fold_units()
    if folder.blocks:
        folder.fold_runs()
    return Folded(folder.nodes, folder.edges, folder.blocks, folder.renamed)


__all__ = ["Folded", "fold_repeats"]
