"""How the graph is drawn: the size of a node on the canvas, and the top-to-bottom layered layout
that places a graph without positions (a template, an import) or on "Auto-layout"."""

from __future__ import annotations

from collections import deque
from typing import Any

# A node on the canvas: its text size and width. With the canvas' smallest zoom (portal/canvas.py) its
# text stays at least ~10 px on screen, also at the zoom that fits a big graph into the canvas.
NODE_FONT_PX = 14
NODE_WIDTH_PX = 240
NODE_STYLE = {"fontSize": f"{NODE_FONT_PX}px", "width": f"{NODE_WIDTH_PX}px", "padding": "2px 8px",
              "lineHeight": "1.35"}
NODE_X_STEP = float(NODE_WIDTH_PX + 50)
NODE_Y_STEP = 160.0  # taller than a node with a problem (two lines of it) and its output shape


def path_between(edges: list[dict[str, Any]], start: str, goal: str) -> list[str] | None:
    """A path ``start → … → goal`` along ``edges`` (breadth-first), or None."""
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e["source"], []).append(e["target"])
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        n = queue.popleft()
        if n == goal:
            path = [n]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])  # type: ignore[arg-type]
            return path[::-1]
        for m in succ.get(n, ()):
            if m not in parent:
                parent[m] = n
                queue.append(m)
    return None


def layered_positions(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Top-to-bottom layered layout: each node one row below its deepest predecessor.

    Nodes left in cycles keep their drawing order after the acyclic part. Linear in the graph size.
    """
    ids = [n["id"] for n in nodes]
    known = set(ids)
    preds: dict[str, list[str]] = {i: [] for i in ids}
    succs: dict[str, list[str]] = {i: [] for i in ids}
    for e in edges:
        if e["source"] in known and e["target"] in known:
            preds[e["target"]].append(e["source"])
            succs[e["source"]].append(e["target"])
    indeg = {i: len(preds[i]) for i in ids}
    layer = {i: 0 for i in ids}
    queue = deque(i for i in ids if indeg[i] == 0)
    order: list[str] = []
    while queue:
        n = queue.popleft()
        order.append(n)
        for m in succs[n]:
            layer[m] = max(layer[m], layer[n] + 1)
            indeg[m] -= 1
            if indeg[m] == 0:
                queue.append(m)
    depth = max((layer[i] for i in order), default=-1) + 1
    for i in ids:
        if i not in set(order):
            layer[i] = depth
            depth += 1
    rows: dict[int, list[str]] = {}
    for i in ids:
        rows.setdefault(layer[i], []).append(i)
    pos: dict[str, tuple[float, float]] = {}
    for row, members in rows.items():
        width = len(members)
        for k, i in enumerate(members):
            pos[i] = ((k - (width - 1) / 2) * NODE_X_STEP, row * NODE_Y_STEP)
    return pos
