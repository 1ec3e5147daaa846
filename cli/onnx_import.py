"""``python -m flowtrain import-onnx MODEL.onnx [--out SPEC.json] [--name NAME]``.

Turns a published ONNX model into a pipeline spec and its canonical weights (``<spec>.weights.npz``
next to the spec, named by the spec's ``training.init_weights``), so that a run starts from the
imported weights in whichever framework it runs (:mod:`core.onnx_import`). What cannot be imported is
reported as the project's problems: every unsupported node at once, with its ONNX op type, name and opset.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.terminal import terminal_text
from core.errors import CommandError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import-onnx", help="turn an ONNX model into a pipeline spec plus its weights (.npz)")
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model to import")
    p.add_argument("--out", default=None, help="the spec to write (default: MODEL.json next to the model); "
                                                "the weights go next to it as <spec>.weights.npz")
    p.add_argument("--name", default=None, help="the pipeline's name (default: the model file's name)")
    p.set_defaults(handler=cmd_import_onnx)


def cmd_import_onnx(args: argparse.Namespace) -> int:
    from core.onnx_import import import_onnx, save_import, weights_name  # onnx is imported by this command only

    model = Path(args.model)
    if not model.is_file():
        raise CommandError(f"{model}: no such ONNX file")
    out = Path(args.out) if args.out else model.with_suffix(".json")
    if out.suffix != ".json":
        raise CommandError(f"--out {out}: the spec is written as JSON; give a path ending in .json")
    result = import_onnx(model, name=args.name or model.stem, weights_file=weights_name(out))
    spec_path, weights_path = save_import(result, out)
    nodes = len(result.spec.model.nodes)
    params = sum(int(a.size) for a in result.weights.values())
    print(terminal_text(f"{spec_path}: {nodes} nodes; {weights_path}: {len(result.weights)} weights ({params:,} "
                        "numbers)"))
    for note in result.notes:  # a note may quote the model's own text (op types, names)
        print(f"note: {terminal_text(note)}")
    return 0
