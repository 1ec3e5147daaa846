"""How far torch parts from itself, over several float32-sized disturbances of one run (docs/generated-program.md,
"The zoo in lockstep"): check-training's --floor is one sample (every start weight moved one ulp up); where a run
amplifies rounding, one sample says little, and this draws several.

    nice -n 19 .venv/bin/python bench/lockstep_spread.py transformer_text_classifier [--optimizer adamw]
        [--steps 50] [--samples 6] [--lr 0.01]

The pipeline is set up as bench/lockstep_zoo.py sets it up (SMALLER, example data). Sample k trains torch from the
start weights with each weight moved one float32 ulp up or down, the signs drawn from a generator seeded k; each
row is that run's largest relative loss difference against torch from the start itself (over every step, and the
step where it is largest, with torch's loss there) and the largest relative difference of a final weight array
(gradient-free arrays apart, as check-training compares them: core/lockstep.py, GRADIENT_FREE).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lockstep_zoo import OPTIMIZERS, PIPELINES, spec_for  # noqa: E402

from core.lockstep import FrameworkRun, check_spec, compare, train_all  # noqa: E402
from core.trained import TrainedModelError, read_trained_many  # noqa: E402
from core.validate import validate  # noqa: E402
from core.weights import random_canonical  # noqa: E402


def disturbed(start: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """`start` with every float weight moved one float32 ulp up or down, the signs drawn from `seed`."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, a in start.items():
        if a.dtype.kind != "f":
            out[name] = a
            continue
        up = rng.random(a.shape) < 0.5
        out[name] = np.where(up, np.nextafter(a, np.inf, dtype=a.dtype), np.nextafter(a, -np.inf, dtype=a.dtype))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", choices=PIPELINES)
    parser.add_argument("--optimizer", default="adamw", choices=OPTIMIZERS)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--lr", type=float, default=None, help="the optimizer's learning rate (default: as the zoo)")
    args = parser.parse_args()
    runs: dict[str, FrameworkRun] = {}
    with tempfile.TemporaryDirectory(prefix="flowtrain-lockstep-spread-") as tmp:
        root = Path(tmp)
        spec, notes = spec_for(args.pipeline, args.optimizer, root / "data", lr=args.lr)
        start = random_canonical(validate(spec), 0)
        jobs = []
        for k in range(args.samples + 1):
            weights = root / f"start-{k}.npz"
            np.savez(weights, **(start if k == 0 else disturbed(start, k)))
            jobs.append(("torch" if k == 0 else f"sample {k}", "torch", check_spec(spec, weights), 1))
        folders = train_all(root, jobs, args.steps, sys.executable, 1800, runs)
        for folder, trained in read_trained_many(list(folders)):
            run = runs[folders[folder]]
            if isinstance(trained, TrainedModelError):
                run.status, run.detail = "failed", str(trained)
            else:
                run.weights = trained.weights
    for name, run in runs.items():
        run.framework = name  # compare() holds every run but "torch" against torch
    compare(runs)
    reference = runs["torch"].losses
    print(f"{args.pipeline}, {args.optimizer}{f' lr {args.lr:g}' if args.lr else ''}, {args.steps} steps ({notes})\n")
    print("| torch from | loss (max rel. diff) | at step (torch's loss) | weights (max rel. diff, array) |\n"
          "|---|---|---|---|")
    for name, run in runs.items():
        if name == "torch":
            continue
        if run.status != "ok":
            print(f"| {name} | {run.status}: {run.detail[:100]} | | |")
            continue
        step = max(reference, key=lambda s: abs(run.losses[s] - reference[s]) / reference[s])
        print(f"| {name} | {run.loss_diff:.1e} | {step} ({reference[step]:.3g}) | "
              f"{run.weight_diff:.1e} ({run.worst_weight}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
