"""Patterns of several ONNX nodes imported as one catalogue op, recognised before the walk.

Some ops are written out in several ONNX operators by FlowTrain's export (self-attention, the exact GELU)
and the walk cannot import the pieces one by one. Before the walk, each matcher is tried on every node of
its anchor type (a Softmax, an Erf); a match — every constant an initialiser, every tensor between the
pieces read by the pattern only — is emitted as one catalogue node where its last ONNX node stands, and its
other nodes are skipped. What does not match is left to the walk, which refuses what it cannot express.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import GraphProto, NodeProto, helper


@dataclass
class Fused:
    """One recognised pattern: the catalogue op it becomes, the tensor it reads, the node that ends it."""

    op: str
    source: str
    end: int  # index of the block's last ONNX node (where the walk emits it)
    output: str
    hint: str
    params: dict[str, Any]
    weights: dict[str, np.ndarray]
    nodes: frozenset[int]  # indices of every ONNX node of the block


@dataclass
class Fusions:
    blocks: dict[int, Fused] = field(default_factory=dict)  # end index → block
    skipped: set[int] = field(default_factory=set)  # indices of every node inside a block


class PatternGraph:
    """The ONNX graph as the matchers read it: producers, reader counts, initialisers."""

    def __init__(self, graph: GraphProto, consts: dict[str, np.ndarray]) -> None:
        self.nodes = list(graph.node)
        self.consts = consts
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output}
        self.readers = Counter(i for n in self.nodes for i in n.input if i)
        self.readers.update(o.name for o in graph.output)
        self.consumers: dict[str, list[int]] = {}  # tensor → the nodes reading it (built once: no scans per match)
        for i, n in enumerate(self.nodes):
            for t in dict.fromkeys(n.input):
                self.consumers.setdefault(t, []).append(i)

    def node(self, tensor: str, op_type: str) -> tuple[int, NodeProto] | None:
        i = self.producer.get(tensor)
        if i is None or self.nodes[i].op_type != op_type:
            return None
        return i, self.nodes[i]

    def only_reader(self, tensor: str) -> int | None:
        """The index of the one node that reads ``tensor`` (and nothing else does), else None."""
        found = self.consumers.get(tensor, [])
        return found[0] if len(found) == 1 and self.readers[tensor] == 1 else None

    def split(self, node: NodeProto) -> tuple[str, np.ndarray] | None:
        """(the computed operand, the constant one) of a binary node with one initialiser operand."""
        a, b = (self.consts.get(i) for i in node.input[:2])
        if len(node.input) != 2 or (a is None) == (b is None):
            return None
        return (node.input[1], a) if a is not None else (node.input[0], b)  # type: ignore[return-value]


def attr(node: NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


Matcher = Callable[[PatternGraph, int], "Fused | None"]


def find_patterns(graph: GraphProto, consts: dict[str, np.ndarray], matchers: dict[str, Matcher]) -> Fusions:
    """Every match of ``matchers`` (anchor ONNX op type → matcher) in ``graph``; blocks do not overlap."""
    g = PatternGraph(graph, consts)
    found = Fusions()
    for i, node in enumerate(g.nodes):
        match = matchers.get(node.op_type)
        fused = match(g, i) if match is not None and i not in found.skipped else None
        if fused is not None and not fused.nodes & (found.skipped | set(found.blocks)):
            found.blocks[fused.end] = fused
            found.skipped.update(fused.nodes - {fused.end})
    return found
