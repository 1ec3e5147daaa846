"""Generated names shared by every framework's mapper.

Layer attributes come from node ids (sanitised, never colliding with the framework's own
attributes or the generated module's names); tensor names follow chains, as hand-written
code does (``x = self.conv1(x)``). Each mapper passes its own reserved names.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Set

from core.mapping.base import ident
from core.validate import Analysis


def sanitise(node_id: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", node_id)
    if not name or name[0].isdigit() or name[0] == "_":
        name = f"node_{name.lstrip('_')}" if name.lstrip("_") else "node"
    return name


def unique(name: str, taken: set[str], reserved: Set[str]) -> str:
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in reserved:
        name = f"{name}_"
    candidate, n = name, 2
    while candidate in taken or candidate in reserved:
        candidate = f"{name}_{n}"
        n += 1
    taken.add(candidate)
    return ident(candidate)


def layer_names(analysis: Analysis, reserved: Set[str]) -> dict[str, str]:
    """node id → attribute name of its layer (``self.<name>``)."""
    taken: set[str] = set()
    return {nid: unique(sanitise(nid), taken, reserved) for nid in analysis.nodes}


def chain_tensor_names(analysis: Analysis, reserved: Set[str],
                       start_from: dict[str, str] | None = None) -> dict[str, str]:
    """node id → name of the tensor it produces in the forward pass.

    A node with one input whose producer feeds nothing else continues that producer's
    name (the old value is dead), so chains read ``x = …(x)``; any other node starts a
    new name, taken from ``start_from[node id]`` (Keras: the layer's attribute name) or else
    from its sanitised id. The Input node's tensor is ``x``.
    """
    consumers: dict[str, int] = {nid: 0 for nid in analysis.nodes}
    for node in analysis.nodes.values():
        for src in node.inputs:
            consumers[src] += 1
    names: dict[str, str] = {}
    taken: set[str] = set()
    for node in analysis.nodes.values():
        if node.op == "Input":
            names[node.id] = "x"
        elif len(node.inputs) == 1 and consumers[node.inputs[0]] == 1:
            names[node.id] = names[node.inputs[0]]
        else:
            base = start_from[node.id] if start_from is not None else sanitise(node.id)
            names[node.id] = unique(base, taken, reserved)
    return names


def logical_layout(dims: tuple[int, ...], dtype: str, analysis: Analysis, node_id: str) -> str:
    """The channels-first layout name of a tensor (``NCHW``, ``NCL``, ``NTF``, ``NT``, ``NF``)."""
    if dtype == "int64":
        return "NT"
    if len(dims) == 3:
        return "NCHW"
    if len(dims) == 2:
        feeds_conv = any(n.op == "Conv1d" and node_id in n.inputs for n in analysis.nodes.values())
        return "NCL" if feeds_conv else "NTF"
    return "NF" if len(dims) == 1 else "N" + "D" * len(dims)
