"""``python -m flowtrain check-training SPEC [--steps N] [--json] [--frameworks F …] [--floor [--floor-samples N]]
[--ranks N]``: lockstep training."""

from __future__ import annotations

import argparse
import json

from core.errors import Problem
from core.frameworks import FRAMEWORKS
from core.load import load_spec
from core.lockstep import DEFAULT_FLOOR_SAMPLES, DEFAULT_STEPS, LockstepError, argument_problems, check_training


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("check-training",
                       help="train N steps in every framework from the same weights and batches; compare with torch")
    p.add_argument("spec")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"optimizer steps (default {DEFAULT_STEPS})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS),
                   help="frameworks to train (default: all; torch is the reference)")
    p.add_argument("--floor", action="store_true",
                   help="also train torch from starts one float32 ulp away (each weight up or down at random): the "
                        "float32 floor of the run, the largest over the samples; the bound is twice it where larger "
                        "than the targets")
    p.add_argument("--floor-samples", type=int, default=None, metavar="N",
                   help=f"with --floor: how many starts one ulp away torch trains from (default {DEFAULT_FLOOR_SAMPLES})")
    p.add_argument("--ranks", type=int, default=1,
                   help="train each program on N local processes (data-parallel, the spec's batch on each) and "
                        "torch once more on one process with the whole global batch (default 1)")
    p.set_defaults(handler=cmd_check_training)


def cmd_check_training(args: argparse.Namespace) -> int:
    samples = DEFAULT_FLOOR_SAMPLES if args.floor_samples is None else args.floor_samples
    problems = argument_problems(args.steps, args.ranks, args.frameworks, samples if args.floor else None)
    if args.floor_samples is not None and not args.floor:
        problems.append(Problem("--floor-samples", "samples of a floor that was not asked for",
                                received=f"--floor-samples {args.floor_samples} without --floor",
                                expected="--floor with it", fix=f"--floor --floor-samples {args.floor_samples}"))
    if problems:
        raise LockstepError(problems)
    report = check_training(load_spec(args.spec), steps=args.steps, frameworks=args.frameworks, floor=args.floor,
                            ranks=args.ranks, floor_samples=samples)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    return 0 if report.ok else 1
