"""Every array of one zoo pipeline's check-training against torch's, by kind (docs/generated-program.md, "The
zoo in lockstep"): where bench/lockstep_zoo.py names only the worst array, this tells a convention that differs
(BatchNorm's running statistics: momentum, eps, the unbiased variance) from rounding that the floor run shares.

    nice -n 19 .venv/bin/python bench/lockstep_arrays.py resnet18_cifar [--optimizer sgd] [--steps 1] [--every-array]

The pipeline is set up as bench/lockstep_zoo.py sets it up (SMALLER, example data); torch trains a second time
from starts one float32 ulp away (the floor samples, a row each). ``--every-array`` adds a row per array and framework (an
attention's in_proj_bias as its query, key and value thirds, as check-training compares them).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lockstep_zoo import OPTIMIZERS, PIPELINES, spec_for  # noqa: E402

from core.lockstep import check_training, comparable, relative_diff  # noqa: E402

KINDS = ("running_mean", "running_var", "weight", "bias")


def kind_of(name: str) -> str:
    """running_mean, running_var, bias (any bias array, an LSTM's summed pair too) or weight (the rest)."""
    array = name.rpartition("/")[2]
    return array if array in ("running_mean", "running_var") else "bias" if "bias" in array else "weight"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", choices=PIPELINES)
    parser.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--every-array", action="store_true", help="also a row per array and framework")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flowtrain-lockstep-arrays-") as tmp:
        spec, notes = spec_for(args.pipeline, args.optimizer, Path(tmp))
        report = check_training(spec, steps=args.steps, floor=True)
    print(report.text(), f"\n({notes})\n")
    reference = comparable(report.runs["torch"].weights)
    print("| framework | arrays | count | max rel. diff (array) | median |\n|---|---|---|---|---|")
    for run in [report.runs["keras"], report.runs["paddle"], *report.floors]:
        if run.status != "ok":
            continue
        weights = comparable(run.weights)
        diffs = {name: relative_diff(weights[name], value) for name, value in reference.items()}
        for kind in KINDS:
            chosen = {name: d for name, d in diffs.items() if kind_of(name) == kind}
            if chosen:
                worst = max(chosen, key=chosen.__getitem__)
                print(f"| {run.framework} | {kind} | {len(chosen)} | {chosen[worst]:.1e} ({worst}) | "
                      f"{np.median(list(chosen.values())):.1e} |")
        if args.every_array:
            for name, d in diffs.items():
                print(f"| {run.framework} | {name} | 1 | {d:.1e} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
