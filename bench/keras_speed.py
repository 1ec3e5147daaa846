"""Generated TensorFlow/Keras training program vs a hand-written expert reference, side by side.

    python bench/keras_speed.py [--reps 3] [--models mnist_cnn mlp resnet18_cifar unet_small] [--quick]

For each model the generated program (``python -m flowtrain generate … --framework keras``) and the
reference in bench/reference/keras_<model>.py (``model.fit`` on a cached, prefetched ``tf.data``
pipeline) train the same network on the same preprocessed data with the same batch size and
optimizer, for the same number of steps, in separate processes run alternately (A B B A …).
Throughput is the median samples/s of the logging intervals after the warm-up ones (the generated
program's "train" records in metrics.jsonl, the reference's JSON lines). Printed: the median over
the repetitions of each, and generated ÷ reference (target ≥ 0.97).

The measurement (cases, data export, alternation, table) is bench/torch_speed.py's, so the three
frameworks' benches read the same way. The CPU is shared and noisy here: read the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from torch_speed import WARMUP_INTERVALS, Case, bench_spec, print_table, side_by_side  # noqa: E402

CASES = {
    "mnist_cnn": Case("mnist_cnn", "keras_mnist_cnn.py", batch=64, steps=70, log_every=10),
    "mlp": Case("mlp", "keras_mlp.py", batch=64, steps=400, log_every=50),
    "resnet18_cifar": Case("resnet18_cifar", "keras_resnet18_cifar.py", batch=32, steps=16, log_every=3,
                           synthetic=(512, 3, 32, 32)),
    # the zoo's U-Net at 16 base channels (torch_speed.py's unet_small: the 64-channel one is too slow here)
    "unet_small": Case("unet_small", "keras_unet.py", batch=8, steps=72, log_every=6, synthetic=(256, 3, 64, 64),
                       kind="segment", classes=4, reference_args=("--base", "16")),
}


def prepare(case: Case, folder: Path) -> dict[str, Any]:
    """Generate the Keras program into folder/program; return what the runs need."""
    from core.codegen import generate
    from core.validate import validate

    spec = bench_spec(case, folder)
    analysis = validate(spec)
    generate(spec, "keras", analysis).write(folder / "program")
    meta = {"name": case.name, "reference": case.reference, "batch": case.batch, "steps": case.steps,
            "log_every": case.log_every, "synthetic": case.synthetic, "classes": case.classes, "kind": case.kind,
            "reference_args": list(case.reference_args), "macs_per_sample": analysis.total_macs}
    (folder / "case.json").write_text(json.dumps(meta))
    return meta


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--reps", type=int, default=3, help="runs of each program per model (default 3)")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test of the bench itself)")
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    parser.add_argument("--reference-steps-per-execution", type=int, default=1, metavar="N",
                        help="let the reference's fit run N steps per call (Keras's steps_per_execution)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flowtrain-keras-bench-") as tmp:
        for name in args.models:
            case = CASES[name]
            if args.quick:
                case = replace(case, steps=max(case.log_every * (WARMUP_INTERVALS + 2), case.steps // 4))
            folder = Path(tmp) / name
            folder.mkdir()
            extra = ["--steps-per-execution", str(args.reference_steps_per_execution)]
            rows.append(side_by_side(folder, prepare(case, folder), args.reps, env, extra))
            print(f"{name}: generated {[round(v) for v in rows[-1]['runs_generated']]}, "
                  f"reference {[round(v) for v in rows[-1]['runs_reference']]} samples/s", flush=True)
    print(f"\nTensorFlow/Keras on CPU ({len(os.sched_getaffinity(0))} cores), {args.reps} alternating runs each, "
          f"{time.perf_counter() - start:.0f} s\n")
    print_table(rows, cpu_time=True)  # per CPU-second too: other jobs on a shared machine stretch only the wall clock
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
