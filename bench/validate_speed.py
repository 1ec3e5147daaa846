"""Validation + shape inference + summary time for 100 / 1,000 / 10,000-node graphs.

    .venv/bin/python bench/validate_speed.py

Prints the median of 5 runs per size and the time per node (linear scaling keeps it flat).
Target (issue 2): a 1,000-node graph under 0.2 s on the 2-core development machines.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.load import spec_from_json  # noqa: E402
from core.validate import analyse  # noqa: E402
from core.zoo.builder import GraphBuilder  # noqa: E402


def residual_mlp(n_nodes: int) -> str:
    """Input → (Linear → ReLU → Linear → Add(skip) → LayerNorm)* → Linear → Output, about n_nodes nodes."""
    g = GraphBuilder()
    x = g.add("Input", id="input", shape=[64])
    while len(g.nodes) + 5 + 2 <= n_nodes:
        y = g.add("Linear", x, out_features=64)
        y = g.add("ReLU", y)
        y = g.add("Linear", y, out_features=64)
        x = g.add("LayerNorm", g.add("Add", y, x))
    while len(g.nodes) < n_nodes - 2:
        x = g.add("ReLU", x)
    x = g.add("Linear", x, out_features=10)
    g.add("Output", x, id="output")
    doc = {"data": {"source": "sklearn:digits", "input_shape": [64]}, "model": g.model()}
    return json.dumps(doc)


def run_once(text: str) -> float:
    start = time.perf_counter()
    result = analyse(spec_from_json(text))
    summary = result.summary()
    elapsed = time.perf_counter() - start
    if result.problems or not summary["layers"]:
        raise SystemExit(f"benchmark graph is invalid: {result.problems[:3]}")
    return elapsed


def main() -> None:
    print(f"{'nodes':>7} {'median s':>10} {'µs/node':>9}")
    for n in (100, 1_000, 10_000):
        text = residual_mlp(n)
        times = [run_once(text) for _ in range(5)]
        med = statistics.median(times)
        print(f"{n:>7,} {med:>10.4f} {med / n * 1e6:>9.1f}")


if __name__ == "__main__":
    main()
