"""``python -m flowtrain check-equivalence SPEC [--json] [--frameworks F …] [--tolerance T]``."""

from __future__ import annotations

import argparse
import json

from core.equivalence import DEFAULT_TOLERANCE, check
from core.frameworks import FRAMEWORKS
from core.load import load_spec


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("check-equivalence",
                       help="run the model in every framework with the same weights and compare outputs")
    p.add_argument("spec")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS),
                   help="frameworks to compare (default: all)")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help=f"largest max-abs difference that counts as equal (default {DEFAULT_TOLERANCE:g})")
    p.add_argument("--batch", type=int, default=2, help="samples in the random input batch (default 2)")
    p.set_defaults(handler=cmd_check_equivalence)


def cmd_check_equivalence(args: argparse.Namespace) -> int:
    report = check(load_spec(args.spec), frameworks=args.frameworks, tolerance=args.tolerance, batch=args.batch)
    if args.json:
        doc = report.to_dict()
        print(json.dumps({"frameworks": doc["frameworks"], "pairs": doc["pairs"], "ok": doc["ok"],
                          "tolerance": doc["tolerance"]}, indent=2))
    else:
        print(report.text())
    return 0 if report.ok else 1
