"""``python -m flowtrain predict RUN INPUT…`` and ``python -m flowtrain models``.

``predict`` runs a completed run's ``model.onnx`` on onnxruntime (no framework) on new inputs,
preprocessed by the run's own ``data.py`` with the statistics fitted on its training split
(:mod:`core.prediction`). ``models`` lists the completed runs that have a ``model.onnx``. A run is
named by its id or its name (:func:`schedulers.run_lookup.find_run`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from cli.common import ADMIN_HELP, command_user, local_time, reconcile_quietly, text_table
from core.errors import CommandError
from core.prediction import as_rows, predict, prepare_inputs, write_predictions
from schedulers.base import RunState
from schedulers.launch import Executors
from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from schedulers.run_lookup import find_run
from settings import load_settings

OUTPUT_SUFFIXES = (".jsonl", ".csv")
PROBABILITY_OPS = ("Softmax",)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("predict", help="run a finished run's model on new inputs (images, CSV, .npy/.npz)")
    p.add_argument("run", metavar="RUN", help="a completed run's id or name")
    p.add_argument("inputs", metavar="INPUT", nargs="+", type=Path,
                   help="images, folders of images, .csv rows, .npy/.npz arrays (N samples first)")
    p.add_argument("--top", type=int, default=3, help="classification: the K most likely classes (default 3)")
    p.add_argument("--batch", type=int, default=256, help="samples per model call (default 256)")
    p.add_argument("--out", type=Path, default=None, help="write the predictions to FILE (.jsonl or .csv)")
    p.add_argument("--framework", choices=("onnx",), default="onnx",
                   help="the engine: onnx (model.onnx on onnxruntime, the only one so far)")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=cmd_predict)

    m = sub.add_parser("models", help="completed runs' models: id, name, framework, final metric, model.onnx")
    m.add_argument("--json", action="store_true")
    m.add_argument("--user", default=None, help=ADMIN_HELP)
    m.set_defaults(handler=cmd_models)


def cmd_predict(args: argparse.Namespace) -> int:
    if args.top < 1 or args.batch < 1:
        raise CommandError(f"--top {args.top} --batch {args.batch}: both must be positive numbers")
    if args.out is not None and args.out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise CommandError(f"--out {args.out}: name the file .jsonl or .csv (the format follows the extension)")
    settings = load_settings()
    registry = RunRegistry(home=settings.home)
    user = command_user(settings, args)
    run = find_run(registry, args.run, user)
    if not run.is_final:  # it may have ended since the registry last looked (this also writes model.onnx)
        reconcile_quietly(registry, Executors(registry.home), run_ids=[run.id])
        run = registry.get(run.id, user)
    model = _model_of(run)
    with tempfile.TemporaryDirectory(prefix="flowtrain-predict-") as workdir:
        inputs = prepare_inputs(run.run_dir, args.inputs, Path(workdir), batch=args.batch)
        results = predict(model, inputs, top=args.top, batch=args.batch, activation=_activation(run))
        fitted = (f"statistics of {', '.join(inputs.fitted)} recomputed from the training split"
                  if inputs.fitted else "no fitted statistics")
        del inputs  # its memory-mapped samples live in workdir
    print(f"run {run.id} ({run.name}): {len(results)} sample(s) through {ONNX_NAME}, preprocessed by the "
          f"run's data.py ({fitted})")
    if args.out is not None:
        write_predictions(results, args.out)
        print(f"{args.out}: {len(results)} prediction(s)")
    else:
        header, rows = as_rows(results)
        print(text_table([tuple(r) for r in rows], tuple(header)))
    return 0


def _model_of(run: Run) -> Path:
    if run.state != RunState.COMPLETED:
        why = f": {run.reason}" if run.reason else ""
        raise CommandError(f"run {run.id} ({run.name}) is {run.state.value}{why}; only a completed run has a "
                           "final model to predict with")
    model = run.run_dir / ONNX_NAME
    if not model.is_file():
        raise CommandError(f"run {run.id} ({run.name}) has no {ONNX_NAME}; write it with "
                           f"`python -m flowtrain export-onnx {run.id} --out {model}`")
    return model


def _activation(run: Run) -> str:
    """How the model's outputs become probabilities: none when a Softmax feeds the Output, else by
    the training loss (sigmoid for ``bce_with_logits``, softmax for cross-entropy's logits)."""
    spec = run.spec()
    ops = {n.id: n.op for n in spec.model.nodes}
    outputs = [n.id for n in spec.model.nodes if n.op == "Output"]
    feeding = [e.source for e in spec.model.edges if e.target in outputs]
    if feeding and all(ops.get(s) in PROBABILITY_OPS for s in feeding):
        return "none"
    return "sigmoid" if spec.training.loss == "bce_with_logits" else "softmax"


def cmd_models(args: argparse.Namespace) -> int:
    settings = load_settings()
    registry = RunRegistry(home=settings.home)
    user = command_user(settings, args)
    reconcile_quietly(registry, Executors(registry.home), user=user)  # as `runs` does: newly ended runs
    models = [_model_row(registry, run) for run in registry.list_runs(user, states=[RunState.COMPLETED])]
    models = [m for m in models if m is not None]
    if args.json:
        print(json.dumps(models, indent=2))
        return 0
    if not models:
        print(f"no completed runs with a {ONNX_NAME} for user {user}")
        return 0
    rows = [(m["id"], m["name"][:30], m["framework"], m["metric"] or "-", f"{m['onnx_bytes']:,}", local_time(m["ended"]))
            for m in models]
    print(text_table(rows, ("RUN", "NAME", "FRAMEWORK", "FINAL METRIC", "MODEL.ONNX BYTES", "ENDED")))
    return 0


def _model_row(registry: RunRegistry, run: Run) -> dict[str, Any] | None:
    model = run.run_dir / ONNX_NAME
    if not model.is_file():
        return None
    result = registry.result(run.id) or {}
    return {"id": run.id, "name": run.name, "framework": run.framework, "metric": _final_metric(result),
            "onnx_bytes": model.stat().st_size, "ended": run.ended}


def _final_metric(result: dict[str, Any]) -> str | None:
    """The headline validation (else test) metric: accuracy for classifiers, else the loss."""
    for key in ("val_accuracy", "test_accuracy", "val_loss", "test_loss"):
        if isinstance(result.get(key), (int, float)):
            return f"{key} {result[key]:.4f}"
    return None
