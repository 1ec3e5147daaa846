"""Editor responsiveness: how long one rerun of the editor page takes with a large graph.

    .venv/bin/python bench/editor_speed.py [--nodes 200] [--repeat 15]

Runs the real ``app.py`` under Streamlit's AppTest (no browser) with a ``--nodes``-node graph on the
canvas (Input → Linear/ReLU/LayerNorm … → Output on the built-in iris data) and times, per case,
the script rerun as AppTest measures it (server-side work: validation, shape inference, the canvas
payload, every widget). Target of issue 6: < 0.3 s per rerun for 200 nodes. The browser's own
drawing of 200 nodes (about 5 s once, see docs/streamlit-flow.md) is not included.

Cases: a plain rerun; a parameter change in the side form (new shapes → the canvas is sent again);
a canvas event (a drag: positions only); a node added from the palette; a data-layer change.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from streamlit.testing.v1 import AppTest  # noqa: E402

from core.spec import PipelineSpec  # noqa: E402
from portal.editor_state import Editor  # noqa: E402
from portal.forms import wkey  # noqa: E402

TARGET_S = 0.3


def big_spec(n_nodes: int) -> PipelineSpec:
    """A chain of ``n_nodes`` nodes (Input and Output included) that validates."""
    nodes = [{"id": "input", "op": "Input"}]
    cycle = [("Linear", {"out_features": 32}), ("ReLU", {}), ("LayerNorm", {})]
    for i in range(n_nodes - 3):
        op, params = cycle[i % 3]
        nodes.append({"id": f"n{i}", "op": op, "params": params})
    nodes.append({"id": "head", "op": "Linear", "params": {"out_features": 3}})
    nodes.append({"id": "output", "op": "Output"})
    edges = [{"source": a["id"], "target": b["id"]} for a, b in zip(nodes, nodes[1:])]
    return PipelineSpec.model_validate({"name": f"chain{n_nodes}", "data": {"source": "sklearn:iris"},
                                        "model": {"nodes": nodes, "edges": edges}})


def measure(at: AppTest, action: Callable[[AppTest], None], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        action(at)
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise SystemExit("the page raised: " + at.exception[0].message)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="flowtrain-bench-")
    os.environ["FLOWTRAIN_HOME"] = home
    os.environ.pop("FLOWTRAIN_CONFIG", None)

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    ed: Editor = at.session_state["portal.editor"]
    ed.load_spec(big_spec(args.nodes))
    at.run()
    assert not ed.problems(), ed.problems()[:3]
    assert len(ed.nodes) == args.nodes

    counter = {"k": 0, "ts": 0}

    def nothing(at: AppTest) -> None:
        pass

    def param(at: AppTest) -> None:
        counter["k"] += 1
        ed.selected = "n0"
        key = wkey(ed, "param.n0.out_features")
        if key in at.session_state:
            at.number_input(key=key).set_value(32 + counter["k"] % 7)
        else:
            ed.set_param("n0", "out_features", 32 + counter["k"] % 7)

    def drag(at: AppTest) -> None:
        nodes, edges = ed.canvas_payload()
        counter["ts"] = max(counter["ts"], ed.canvas_ts, ed.last_event_ts or 0) + 1
        moved = [dict(n, position={"x": n["position"]["x"] + 1, "y": n["position"]["y"]}) for n in nodes]
        at.session_state[ed.canvas_key] = {"nodes": moved, "edges": edges, "selectedId": None,
                                           "timestamp": counter["ts"]}

    def add(at: AppTest) -> None:
        at.button(key="palette.Dropout").click()

    def data(at: AppTest) -> None:
        counter["k"] += 1
        at.number_input(key=wkey(ed, "data.batch_size")).set_value(32 + counter["k"] % 5)

    measure(at, nothing, 2)  # warm-up
    rows = []
    for name, action in (("rerun, nothing changed", nothing), ("side form: parameter changed", param),
                         ("canvas event: nodes dragged", drag), ("palette: node added", add),
                         ("data layer: batch size changed", data)):
        times = measure(at, action, args.repeat)
        rows.append((name, statistics.median(times), max(times)))

    print(f"Editor page rerun with a {args.nodes}-node graph (AppTest, {args.repeat} reruns per case; "
          f"target < {TARGET_S} s)\n")
    print(f"| {'case':<32} | median s | max s | within target |")
    print(f"|{'-' * 34}|---------:|------:|:-------------:|")
    ok = True
    for name, med, worst in rows:
        ok &= med < TARGET_S
        print(f"| {name:<32} | {med:8.3f} | {worst:5.3f} | {'yes' if med < TARGET_S else 'NO':^13} |")
    print(f"\nnodes on the canvas at the end: {len(ed.nodes)}; canvas payload "
          f"{len(str(ed.canvas_payload()[0])) / 1024:.0f} KiB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
