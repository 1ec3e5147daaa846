"""Step times of the zoo's small pipelines for the learned MACs model's test (tests/schedulers/data/step_times.json).

    .venv/bin/python bench/step_times.py --frameworks torch,keras,paddle [--out rows.json]

Generates each pipeline at batch 16, 64 and 256 in each framework and runs ``train.py --calibrate 8`` (3 warm-up
steps, 8 timed), one after another, printing a row per program with the load average when it started: on a
shared machine the load decides a step time as much as the graph does, so rows meant to be fitted together
should be taken in one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402

PIPELINES = ("mlp", "lenet5", "mnist_cnn")
BATCHES = (16, 64, 256)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,keras,paddle")
    parser.add_argument("--out", type=Path, default=None, help="write the rows here (JSON)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fw in args.frameworks.split(","):
            for name in PIPELINES:
                for batch in BATCHES:
                    doc = zoo.template(name).model_dump(mode="json")
                    doc["data"]["batch_size"] = batch
                    d = Path(tmp) / f"{fw}-{name}-{batch}"
                    d.mkdir()
                    (d / "spec.json").write_text(json.dumps(doc), encoding="utf-8")
                    subprocess.run([sys.executable, "-m", "flowtrain", "generate", str(d / "spec.json"), "--framework",
                                    fw, "--out", str(d / "prog")], check=True, cwd=REPO, capture_output=True)
                    load = os.getloadavg()[0]
                    p = subprocess.run([sys.executable, "train.py", "--calibrate", "8", "--out", str(d / "out")],
                                       cwd=d / "prog", capture_output=True, text=True, check=False)
                    if p.returncode:
                        print(f"{fw} {name} {batch}: exit {p.returncode}: {p.stderr[-2000:]}", file=sys.stderr)
                        continue
                    step_s = json.loads((d / "out" / "calibration.json").read_text(encoding="utf-8"))["step_s"]
                    rows.append({"pipeline": name, "framework": fw, "batch_size": batch, "step_s": round(step_s, 5),
                                 "load": round(load, 1)})
                    print(json.dumps(rows[-1]), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
