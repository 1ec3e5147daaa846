"""How the graph is drawn: the size of a node on the canvas, and the top-to-bottom layered layout
that places a graph without positions (a template, an import) or on "Auto-layout"."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

# A node on the canvas: its text size and width. With the canvas' smallest zoom (portal/canvas.py) its
# text stays at least ~10 px on screen, also at the zoom that fits a big graph into the canvas.
NODE_FONT_PX = 14
NODE_WIDTH_PX = 240
NODE_STYLE = {"fontSize": f"{NODE_FONT_PX}px", "width": f"{NODE_WIDTH_PX}px", "padding": "2px 8px",
              "lineHeight": "1.35"}
NODE_X_STEP = float(NODE_WIDTH_PX + 40)
NODE_Y_STEP = 125.0  # taller than a laid-out node with its output shape and one line of a problem
# A node drawn from the palette is unconnected: its parameters, shape and two lines of its problem make it
# taller than a laid-out row, and at 125 px it covered the input handle of the next one added below it.
DRAWN_Y_STEP = 160.0


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


# The canvas as the layout plans for it (portal/canvas.py; its width is the page's middle column, about
# this wide in a 1600 px window), less React Flow's fitting margin: long graphs wrap into as many
# columns as give the largest fitted zoom.
CANVAS_PLAN_PX = (600.0, 720.0)


def _layers(ids: list[str], preds: dict[str, list[str]], succs: dict[str, list[str]]) -> dict[str, int]:
    """Each node one layer below its deepest predecessor; nodes left in cycles after the rest, in order."""
    indeg = {i: len(preds[i]) for i in ids}
    layer = {i: 0 for i in ids}
    queue = deque(i for i in ids if indeg[i] == 0)
    done: set[str] = set()
    while queue:
        n = queue.popleft()
        done.add(n)
        for m in succs[n]:
            layer[m] = max(layer[m], layer[n] + 1)
            indeg[m] -= 1
            if indeg[m] == 0:
                queue.append(m)
    depth = max((layer[i] for i in done), default=-1) + 1
    for i in ids:
        if i not in done:
            layer[i] = depth
            depth += 1
    return layer


def _lanes(ids: list[str], layer: dict[str, int], preds: dict[str, list[str]],
           succs: dict[str, list[str]]) -> dict[str, int]:
    """A column per node such that an edge skipping layers runs down a column of its own, free of nodes.

    Layer by layer: a node that ends a skip edge goes back into that edge's column (the main path
    returns to its trunk), else under its first input; the first free column nearest to that wins,
    free also for the rows its own skip edges will cross. Those rows are then reserved in its column.
    """
    taken: set[tuple[int, int]] = set()
    lane: dict[str, int] = {}
    by_layer: dict[int, list[str]] = {}
    for i in ids:
        by_layer.setdefault(layer[i], []).append(i)
    for row in sorted(by_layer):
        for node in by_layer[row]:
            placed = [p for p in preds[node] if p in lane]
            skips = [p for p in placed if layer[node] - layer[p] > 1]
            want = lane[skips[0]] if skips else lane[placed[0]] if placed else 0
            reach = max((layer[m] for m in succs[node] if layer[m] > row), default=row)
            for step in range(len(ids) + 1):
                for col in ((want + step, want - step) if step else (want,)):
                    if all((r, col) not in taken for r in range(row, max(reach, row + 1))):
                        break
                else:
                    continue
                break
            lane[node] = col
            for r in range(row, max(reach, row + 1)):
                taken.add((r, col))
    return lane


BAND_GAP_PX = 60.0  # between two columns of a wrapped graph, besides a node step's own margin


def _bands(spans: list[tuple[int, int]], cuts: set[int]) -> list[tuple[int, int]]:
    """The layers (``spans``: each layer's lowest and highest column) split into consecutive bands
    (columns of the page), each ending after a cut layer, as many as give the largest fitted zoom on
    :data:`CANVAS_PLAN_PX`."""
    layer_count = len(spans)
    best: tuple[float, list[tuple[int, int]]] | None = None
    for count in range(1, layer_count + 1):
        rows = max(1, -(-layer_count // count))
        bands, start = [], 0
        while start < layer_count:
            end = start + rows
            while end < layer_count and end - 1 not in cuts:
                end += 1
            bands.append((start, min(end, layer_count)))
            start = end
        wide = sum(max(spans[r][1] for r in range(a, b)) - min(spans[r][0] for r in range(a, b)) + 1 for a, b in bands)
        width = wide * NODE_X_STEP + (len(bands) - 1) * BAND_GAP_PX
        tallest = max(b - a for a, b in bands)
        zoom = min(CANVAS_PLAN_PX[0] / width, CANVAS_PLAN_PX[1] / (tallest * NODE_Y_STEP))
        if best is None or zoom > best[0] + 1e-9:
            best = (zoom, bands)
        if len(bands) < count:  # no more cuts to break at
            break
    return best[1] if best else [(0, layer_count)]


def layered_positions(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Top-to-bottom layered layout, each node one row below its deepest predecessor.

    The main path reads top to bottom; an edge that skips rows (a residual connection, a dense
    layer's concatenation) runs down a column no node stands in, so it is seen (:func:`_lanes`). A
    long graph continues in the next column to the right, like a newspaper, broken only after a node
    every path goes through (one edge crosses), so that fitting it to the canvas keeps it readable.
    Nodes left in cycles go after the acyclic part. Near-linear in the graph size.
    """
    ids = [n["id"] for n in nodes]
    known = set(ids)
    preds: dict[str, list[str]] = {i: [] for i in ids}
    succs: dict[str, list[str]] = {i: [] for i in ids}
    for e in edges:
        if e["source"] in known and e["target"] in known:
            preds[e["target"]].append(e["source"])
            succs[e["source"]].append(e["target"])
    layer = _layers(ids, preds, succs)
    lane = _lanes(ids, layer, preds, succs)
    layer_count = max(layer.values(), default=-1) + 1
    members = Counter(layer.values())
    crossed: set[int] = set()
    for e in edges:
        if e["source"] in known and e["target"] in known:
            crossed.update(range(layer[e["source"]] + 1, layer[e["target"]]))
    seen_layers: set[int] = set()
    cuts = {r for r in range(layer_count) if members[r] == 1 and r not in crossed}
    spans = [(0, 0)] * layer_count
    for i in ids:
        low, high = spans[layer[i]] if layer[i] in seen_layers else (lane[i], lane[i])
        spans[layer[i]] = (min(low, lane[i]), max(high, lane[i]))
        seen_layers.add(layer[i])
    bands = _bands(spans, cuts)
    pos: dict[str, tuple[float, float]] = {}
    x0 = 0.0
    for start, end in bands:
        inside = [i for i in ids if start <= layer[i] < end]
        if not inside:
            continue
        low = min(lane[i] for i in inside)
        for i in inside:
            pos[i] = (x0 + (lane[i] - low) * NODE_X_STEP, (layer[i] - start) * NODE_Y_STEP)
        x0 += (max(lane[i] for i in inside) - low + 1) * NODE_X_STEP + BAND_GAP_PX
    return pos
