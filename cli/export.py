"""``python -m flowtrain export-onnx RUN|SPEC [--weights W.npz] [--seed N] [--out model.onnx]``.

ONNX written from the spec and canonical weights, with no framework in this process
(:mod:`core.onnx_export`). From a spec file: the weights of ``--weights`` (canonical ``.npz``), else
random ones drawn from the ops' initialisers with ``--seed``. From a run id: the run's spec and its
final model, read back by its framework in a subprocess (or ``--weights``). A run is named by its
id or its name (:func:`schedulers.run_lookup.find_run`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.common import ADMIN_HELP
from core.errors import CommandError
from core.load import load_spec
from core.validate import validate
from core.weights import load_npz, random_canonical
from schedulers.model_export import export_run_onnx
from schedulers.registry.runs import RUN_ID_RE, RunRegistry
from schedulers.run_lookup import find_run
from settings import load_settings
from settings.access import acting_user


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("export-onnx", help="write ONNX from a spec (and weights) or a finished run, no framework")
    p.add_argument("source", metavar="RUN|SPEC", help="a pipeline spec file, or the id or name of a run with a final model")
    p.add_argument("--weights", default=None, help="canonical weights (.npz, keys '<node id>/<name>')")
    p.add_argument("--seed", type=int, default=0, help="for a spec without --weights: seed of the random weights")
    p.add_argument("--out", default="model.onnx", help="the ONNX file to write (default model.onnx)")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=cmd_export_onnx)


def cmd_export_onnx(args: argparse.Namespace) -> int:
    from core.onnx_export import OPSET, export_onnx, save_onnx  # onnx is imported only by this command

    source = Path(args.source)
    if source.is_file():
        spec = load_spec(source)
        analysis = validate(spec)
        if args.weights is not None:
            weights, origin = load_npz(args.weights), args.weights
        else:
            weights, origin = random_canonical(analysis, args.seed), f"random weights (seed {args.seed})"
        path = save_onnx(export_onnx(spec, weights, analysis=analysis), args.out)
    elif RUN_ID_RE.fullmatch(args.source) and not source.suffix:
        settings = load_settings()
        registry = RunRegistry(home=settings.home)
        run = find_run(registry, args.source, acting_user(settings, args.user))
        path, origin = export_run_onnx(run, args.out, weights=args.weights)
        origin = f"run {run.id} ({run.framework}): {origin}"
    else:
        raise CommandError(f"{args.source}: no such spec file, and not a run id or name "
                           "(`python -m flowtrain runs` lists the runs)")
    print(f"{path}: ONNX opset {OPSET}, {path.stat().st_size:,} bytes, weights from {origin}")
    return 0
