"""FlowTrain command line: ``python -m flowtrain COMMAND …``.

Each command family lives beside the code it drives and registers its own
sub-commands (``register(subparsers)``); this file only wires them together and
turns the project's own errors into a message and an exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from core.errors import FlowTrainError

# Modules that contribute sub-commands, in the order `--help` lists them.
COMMAND_MODULES = (
    "core.cli",
    "core.codegen_cli",
    "schedulers.cli",
    "core.equivalence_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m flowtrain",
        description="FlowTrain: one drawn pipeline, three frameworks, local or Slurm.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command family is not built yet
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except FlowTrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
