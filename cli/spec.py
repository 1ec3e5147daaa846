"""Spec-level commands: schema, zoo (with the old names templates/template as aliases), validate,
summary, ops."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.terminal import terminal_text
from core import zoo
from core.errors import SpecError
from core.load import load_spec
from core.ops import REGISTRY
from core.spec import json_schema
from core.validate import Analysis, analyse
from core.weights import init_weight_problems


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("schema", help="print the JSON Schema of the pipeline spec")
    p.set_defaults(handler=cmd_schema)

    p = sub.add_parser("zoo", help="list the model zoo's pipelines, or print one (NAME) as a spec")
    p.add_argument("name", nargs="?", help="print this pipeline as a pipeline spec")
    p.add_argument("--json", action="store_true", help="the list as JSON")
    p.set_defaults(handler=cmd_zoo)

    # The zoo's old names ("template" also names the Jinja files of the generated programs).
    p = sub.add_parser("templates", help="old name of `zoo`")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_renamed("templates", "zoo", cmd_zoo), name=None)

    p = sub.add_parser("template", help="old name of `zoo NAME`")
    p.add_argument("name")
    p.set_defaults(handler=_renamed("template NAME", "zoo NAME", cmd_zoo), json=False)

    p = sub.add_parser("validate", help="check a spec; exit 2 listing every problem")
    p.add_argument("spec")
    p.add_argument("--json", action="store_true", help="problems as JSON")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("summary", help="layers, output shapes, parameters and MACs")
    p.add_argument("spec")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_summary)

    p = sub.add_parser("ops", help="the op catalogue with every op's parameters")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_ops)


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0


def _renamed(old: str, new: str, handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """An old command name that still works, saying its new one on stderr (stdout stays the same)."""

    def run(args: argparse.Namespace) -> int:
        print(f"note: `flowtrain {old}` is now `flowtrain {new}`", file=sys.stderr)
        return handler(args)

    return run


def cmd_zoo(args: argparse.Namespace) -> int:
    if args.name is not None:
        print(zoo.template(args.name).to_json())
        return 0
    entries = zoo.entries()
    if args.json:
        print(json.dumps([{"name": e.name, "summary": e.summary} for e in entries], indent=2))
    else:
        width = max(len(e.name) for e in entries)
        for e in entries:
            print(f"{e.name:<{width}}  {e.summary}")
    return 0


def _analyse_file(path: str) -> Analysis:
    return analyse(load_spec(path))


def _weights_problems(path: str, analysis: Analysis) -> list[Any]:
    """The starting weights (``training.init_weights``, a relative path next to the spec) against the graph:
    every node whose weights no longer fit, named in one problem (a run is refused with it too)."""
    weights = load_spec(path).training.init_weights
    if weights is None:
        return []
    full = Path(weights) if Path(weights).is_absolute() else Path(path).resolve().parent / weights
    return init_weight_problems(analysis, str(full))


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        result = _analyse_file(args.spec)
    except SpecError as err:
        return _report(err.problems, args.json)
    problems = list(result.problems) or _weights_problems(args.spec, result)
    if problems:
        return _report(problems, args.json)
    if args.json:
        print(json.dumps({"valid": True, "problems": []}))
    else:
        print(f"{args.spec}: valid ({len(result.nodes)} nodes, {result.total_params:,} parameters)")
    return 0


def _report(problems: list[Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps({"valid": False, "problems": [p.to_dict() for p in problems]}, indent=2))
    else:
        print(f"error: {terminal_text(str(SpecError(problems)))}", file=sys.stderr)
    return 2


def cmd_summary(args: argparse.Namespace) -> int:
    try:
        result = _analyse_file(args.spec)
    except SpecError as err:
        return _report(err.problems, args.json)
    if result.problems:
        return _report(result.problems, args.json)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    rows = [(row["id"], row["op"], "×".join(map(str, row["output_shape"])) + ("" if row["dtype"] == "float32"
            else f" {row['dtype']}"), f"{row['params']:,}", f"{row['macs']:,}") for row in summary["layers"]]
    header = ("id", "op", "output", "params", "MACs")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(5)]
    print("  ".join(h.ljust(w) if i < 3 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for r in rows:
        print("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(f"total: {summary['params']:,} parameters, {summary['macs']:,} MACs "
          f"({summary['macs'] / 1e9:.2f} GMACs per sample)")
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    ops = [REGISTRY.get(n).describe() for n in REGISTRY.names()]
    if args.json:
        print(json.dumps(ops, indent=2))
        return 0
    for family, names in REGISTRY.families().items():
        print(f"[{family}]")
        for n in names:
            op = REGISTRY.get(n)
            params = ", ".join(p.name + ("" if p.required else f"={p.default!r}") for p in op.params)
            print(f"  {n}({params}) — {op.help}")
    return 0
