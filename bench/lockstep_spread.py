"""How far torch parts from itself, over several float32-sized disturbances of one run (docs/generated-program.md,
"The zoo in lockstep"), and, with ``--against``, whether another framework's program parts from torch's as torch
parts from itself, start by start.

    nice -n 19 .venv/bin/python bench/lockstep_spread.py transformer_text_classifier [--optimizer adamw]
        [--steps 50] [--samples 6] [--lr 0.01] [--against paddle] [--against-threads 1]

The pipeline is set up as bench/lockstep_zoo.py sets it up (SMALLER, example data). Sample k trains torch from the
start weights with each weight moved one float32 ulp up or down, the signs drawn from a generator seeded k
(``core.lockstep.one_ulp_away``, what check-training's ``--floor`` samples are); each row is that run's largest
relative loss difference against torch from the start itself (over every step, and the step where it is
largest, with torch's loss there) and the largest relative difference of a final weight array (gradient-free
arrays apart, as check-training compares them: core/lockstep.py, GRADIENT_FREE).

``--against F`` also trains F's program from the start and from every sample's start, and adds per start F against
torch from the same start, and F against F from the start: a mapping difference parts F from torch from every
start at about the same size; chaos (a rounding that carries a unit across a ReLU's or max-pool's kink) parts
them from some starts and not from others, as it parts torch from torch. ``--against torch --against-threads 1``
trains torch's program a second time on one thread (``OMP_NUM_THREADS``: every reduction in another order, a
rounding difference at every step, as a second framework's is, where a start one ulp away is one at the start).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lockstep_zoo import OPTIMIZERS, PIPELINES, spec_for  # noqa: E402

from core.frameworks import FRAMEWORKS  # noqa: E402
from core.lockstep import (  # noqa: E402
    FrameworkRun,
    check_spec,
    comparable,
    gradient_free,
    one_ulp_away,
    relative_diff,
    train_all,
)
from core.trained import TrainedModelError, read_trained_many  # noqa: E402
from core.validate import validate  # noqa: E402
from core.weights import random_canonical  # noqa: E402


def difference(run: FrameworkRun, reference: FrameworkRun) -> str:
    """`run` against `reference` as table cells: the largest relative loss difference, the step where it is (with
    the reference's loss there), and the largest relative weight difference (the array), gradient-free arrays
    apart."""
    if run.status != "ok" or reference.status != "ok":
        failed = run if run.status != "ok" else reference
        return f"{failed.framework} {failed.status}: {failed.detail[:100]} | | "
    if set(run.losses) != set(reference.losses):
        return f"{run.framework} logged other steps than {reference.framework} | | "
    ref = reference.losses
    step = max(ref, key=lambda s: abs(run.losses[s] - ref[s]) / max(abs(ref[s]), 1e-12))
    loss = abs(run.losses[step] - ref[step]) / max(abs(ref[step]), 1e-12)
    mine, theirs = comparable(run.weights), comparable(reference.weights)
    diffs = {name: relative_diff(mine[name], value) for name, value in theirs.items() if not gradient_free(name)}
    worst = max(diffs, key=diffs.__getitem__)
    return f"{loss:.1e} | {step} ({ref[step]:.3g}) | {diffs[worst]:.1e} ({worst})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", choices=PIPELINES)
    parser.add_argument("--optimizer", default="adamw", choices=OPTIMIZERS)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--lr", type=float, default=None, help="the optimizer's learning rate (default: as the zoo)")
    parser.add_argument("--against", choices=FRAMEWORKS, default=None,
                        help="also train this framework's program from every start and compare start by start")
    parser.add_argument("--against-threads", type=int, default=None,
                        help="train the --against programs on this many threads (OMP_NUM_THREADS)")
    args = parser.parse_args()
    if args.against == "torch" and args.against_threads is None:
        parser.error("--against torch trains torch's program again: give it --against-threads N to be another run")
    runs: dict[str, FrameworkRun] = {}
    against = args.against and (args.against if args.against_threads is None else
                                f"{args.against}-{args.against_threads}-thread")
    with tempfile.TemporaryDirectory(prefix="flowtrain-lockstep-spread-") as tmp:
        root = Path(tmp)
        spec, notes = spec_for(args.pipeline, args.optimizer, root / "data", lr=args.lr)
        start = random_canonical(validate(spec), 0)
        jobs, against_jobs = [], []
        for k in range(args.samples + 1):
            weights = root / f"start-{k}.npz"
            np.savez(weights, **(start if k == 0 else one_ulp_away(start, k)))
            jobs.append((f"torch {k}", "torch", check_spec(spec, weights), 1))
            if against:
                against_jobs.append((f"{against} {k}", args.against, check_spec(spec, weights), 1))
        folders = train_all(root, jobs, args.steps, sys.executable, 1800, runs)
        if args.against_threads is not None:  # read by the programs' launcher (core/lockstep_launch.py)
            os.environ["OMP_NUM_THREADS"] = str(args.against_threads)
        folders.update(train_all(root, against_jobs, args.steps, sys.executable, 1800, runs))
        for folder, trained in read_trained_many(list(folders)):
            run = runs[folders[folder]]
            if isinstance(trained, TrainedModelError):
                run.status, run.detail = "failed", str(trained)
            else:
                run.weights = trained.weights
    print(f"{args.pipeline}, {args.optimizer}{f' lr {args.lr:g}' if args.lr else ''}, {args.steps} steps ({notes})\n")
    columns = ["start", "torch against torch from the start: loss (max rel. diff)", "at step (torch's loss)",
               "weights (max rel. diff, array)"]
    if against:
        f = against
        columns += [f"{f} against torch from the same start: loss", "at step (torch's loss)", "weights",
                    f"{f} against {f} from the start: loss", f"at step ({f}'s loss)", "weights"]
    print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    for k in range(args.samples + 1):
        cells = ["the start" if k == 0 else f"one ulp away, seed {k}",
                 "(the reference) | |" if k == 0 else difference(runs[f"torch {k}"], runs["torch 0"])]
        if against:
            f = against
            cells.append(difference(runs[f"{f} {k}"], runs[f"torch {k}"]))
            cells.append("(the reference) | |" if k == 0 else difference(runs[f"{f} {k}"], runs[f"{f} 0"]))
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
