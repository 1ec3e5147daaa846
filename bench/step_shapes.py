"""Step times of graphs of many shapes, for the learned MACs model's shipped prior (schedulers/shipped.py).

    .venv/bin/python bench/step_shapes.py --frameworks torch,keras,paddle --out rows.json

The zoo's MNIST CNN with its model replaced by each of :data:`VARIANTS` (MLPs narrow, wide and deep; convolution
nets from 4 to 96 channels, with tanh and average pooling or ReLU and max pooling, with batch normalisation), and
the zoo's own MLP, LeNet-5 and MNIST CNN, generated in each framework and run with ``train.py --calibrate 20`` one
after another; a row per program with its graph's features (training MACs, parameters, activations and layers per
sample) and the load average when it started. The variants are what the prior is fitted to; the zoo's three are
what it is checked on (tests/schedulers/test_macs_model.py), so no graph is both. Take the rows on an idle machine,
in one sitting: the load decides a step time as much as the graph does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402
from core.load import spec_from_dict  # noqa: E402
from core.validate import validate  # noqa: E402
from schedulers.speed import train_acts_per_sample, train_macs_per_sample  # noqa: E402

Layer = tuple[str, dict[str, Any]]


def _dense(*widths: int, act: str = "ReLU") -> list[Layer]:
    layers: list[Layer] = [("Flatten", {})]
    for w in widths:
        layers += [("Linear", {"out_features": w}), (act, {})]
    return layers + [("Linear", {"out_features": 10})]


VARIANTS: dict[str, list[Layer]] = {
    "mlp_small": _dense(64),
    "mlp_wide": _dense(1024, 1024),
    "mlp_deep": _dense(256, 256, 256, 256, 256),
    "cnn_tiny": [("Conv2d", {"out_channels": 4, "kernel_size": 3}), ("ReLU", {}), ("MaxPool2d", {"kernel_size": 2}),
                 *_dense()],
    "cnn_tanh": [("Conv2d", {"out_channels": 8, "kernel_size": 5}), ("Tanh", {}), ("AvgPool2d", {"kernel_size": 2}),
                 ("Conv2d", {"out_channels": 16, "kernel_size": 3}), ("Tanh", {}), ("AvgPool2d", {"kernel_size": 2}),
                 *_dense(64, act="Tanh")],
    "cnn_mid": [("Conv2d", {"out_channels": 16, "kernel_size": 3}), ("ReLU", {}),
                ("Conv2d", {"out_channels": 32, "kernel_size": 3}), ("ReLU", {}), ("MaxPool2d", {"kernel_size": 2}),
                *_dense(64)],
    "cnn_bn": [("Conv2d", {"out_channels": 16, "kernel_size": 3}), ("BatchNorm2d", {}), ("ReLU", {}),
               ("MaxPool2d", {"kernel_size": 2}), ("Conv2d", {"out_channels": 32, "kernel_size": 3}),
               ("BatchNorm2d", {}), ("ReLU", {}), ("MaxPool2d", {"kernel_size": 2}), *_dense()],
    "cnn_wide": [("Conv2d", {"out_channels": 48, "kernel_size": 3}), ("ReLU", {}),
                 ("Conv2d", {"out_channels": 96, "kernel_size": 3}), ("ReLU", {}), ("MaxPool2d", {"kernel_size": 2}),
                 *_dense()],
}
ZOO = ("mlp", "lenet5", "mnist_cnn")


def variant(name: str) -> dict[str, Any]:
    """The zoo's MNIST CNN pipeline (data, training) with the model of ``VARIANTS[name]``, or a zoo pipeline."""
    if name in ZOO:
        return zoo.template(name).model_dump(mode="json")
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    ids = ["input"] + [f"{op.lower()}{i}" for i, (op, _) in enumerate(VARIANTS[name], 1)] + ["output"]
    nodes = [{"id": "input", "op": "Input", "params": {}}]
    nodes += [{"id": i, "op": op, "params": params} for i, (op, params) in zip(ids[1:-1], VARIANTS[name])]
    nodes += [{"id": "output", "op": "Output", "params": {}}]
    doc["name"] = name
    doc["model"] = {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:])]}
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,keras,paddle")
    parser.add_argument("--graphs", default=",".join([*VARIANTS, "mlp_wide@16", "cnn_mid@16", "cnn_mid@256", *ZOO]),
                        help="NAME or NAME@BATCH (the batch size instead of 64)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None, help="write the rows here (JSON)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fw in args.frameworks.split(","):
            for graph in args.graphs.split(","):
                name, _, batch = graph.partition("@")
                doc = variant(name)
                doc["data"]["batch_size"] = int(batch or doc["data"]["batch_size"])
                d = Path(tmp) / f"{fw}-{name}-{doc['data']['batch_size']}"
                d.mkdir()
                (d / "spec.json").write_text(json.dumps(doc), encoding="utf-8")
                subprocess.run([sys.executable, "-m", "flowtrain", "generate", str(d / "spec.json"), "--framework",
                                fw, "--out", str(d / "prog")], check=True, cwd=REPO, capture_output=True)
                load = os.getloadavg()[0]
                p = subprocess.run([sys.executable, "train.py", "--calibrate", str(args.steps), "--out", str(d / "out")],
                                   cwd=d / "prog", capture_output=True, text=True, check=False)
                if p.returncode:
                    print(f"{fw} {name}: exit {p.returncode}: {p.stderr[-2000:]}", file=sys.stderr)
                    continue
                cal = json.loads((d / "out" / "calibration.json").read_text(encoding="utf-8"))
                analysis = validate(spec_from_dict(doc))
                rows.append({"graph": name, "framework": fw, "batch_size": doc["data"]["batch_size"],
                             "macs_per_sample": train_macs_per_sample(analysis), "params": analysis.total_params,
                             "acts_per_sample": train_acts_per_sample(analysis),
                             "step_s": round(cal["step_s"], 6), "load": round(load, 2)})
                print(json.dumps(rows[-1]), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
