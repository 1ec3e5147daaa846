"""FlowTrain command line: ``python -m flowtrain COMMAND …``.

The commands live in the :mod:`cli` package, one module per command group, each registering its
own sub-commands; this file only wires them together and turns the project's own errors into a
message and an exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from cli import COMMAND_MODULES
from cli.terminal import terminal_text
from core.errors import FlowTrainError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m flowtrain",
        description="FlowTrain: one drawn pipeline, three frameworks, local or Slurm.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # The registry, run directories and generated programs are private to their owner.
    os.umask(0o077)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except FlowTrainError as exc:
        print(f"error: {terminal_text(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
