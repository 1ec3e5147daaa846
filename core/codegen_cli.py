"""``python -m flowtrain generate SPEC --framework F --out DIR``."""

from __future__ import annotations

import argparse

from core.codegen import generate
from core.load import load_spec
from core.mapping.base import FRAMEWORKS


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("generate", help="write a standalone training program for one framework")
    p.add_argument("spec")
    p.add_argument("--framework", required=True, choices=FRAMEWORKS)
    p.add_argument("--out", required=True, help="directory to write train.py, model.py, … into")
    p.set_defaults(handler=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    program = generate(load_spec(args.spec), args.framework)
    for path in program.write(args.out):
        print(path)
    return 0
