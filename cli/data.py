"""Data commands: example-data (small example data in the layout a pipeline's data layer expects)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core import zoo
from core.example_data import record_path, write_example_data
from core.load import load_spec
from settings import load_settings
from settings.access import check_user_name, os_user


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("example-data", help="write small example data for a zoo pipeline or spec under a data root "
                       "(never over data FlowTrain did not write)")
    p.add_argument("pipeline", help="a model zoo pipeline's name (python -m flowtrain zoo) or a spec file")
    p.add_argument("--out", required=True, type=Path, help="the data root to write under (the source's path inside it)")
    p.add_argument("--samples", type=int, default=300, help="about this many samples (at least one per class)")
    p.set_defaults(handler=cmd_example_data)


def cmd_example_data(args: argparse.Namespace) -> int:
    names = {e.name for e in zoo.entries()}
    spec = zoo.template(args.pipeline) if args.pipeline in names else load_spec(args.pipeline)
    record = record_path(load_settings().home, check_user_name(os_user()))  # what FlowTrain wrote for you
    written = write_example_data(spec, args.out, record=record, samples=max(1, args.samples))
    print(f"wrote {written.detail} to {written.path} ({written.amount})")
    for path in written.kept:
        print(f"kept {path}: FlowTrain wrote it earlier, but it has changed since, so it is yours now")
    print(f"the pipeline's relative source resolves under a data root: with {args.out} among your data roots "
          "([data] roots in the settings file), `python -m flowtrain run` and the portal find it")
    return 0
