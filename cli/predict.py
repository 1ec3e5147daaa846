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

import numpy as np

from cli.common import ADMIN_HELP, command_user, local_time, reconcile_quietly, text_table
from core.errors import CommandError
from core.frameworks import FRAMEWORKS
from core.mask_prediction import as_mask_rows, class_labels, mask_paths, segment, write_mask_records
from core.prediction import (
    Inputs,
    activation_of,
    as_rows,
    interpret,
    onnx_batches,
    onnx_outputs,
    prepare_inputs,
    write_predictions,
)
from schedulers.base import RunState
from schedulers.launch import Executors
from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from schedulers.run_lookup import find_run
from settings import load_settings

OUTPUT_SUFFIXES = (".jsonl", ".csv")
ENGINES = ("onnx", *FRAMEWORKS)
SEGMENTATION = "segmentation"  # data.task: a mask per image (core.mask_prediction)
LANGUAGE_MODELING = "language_modeling"  # data.task: generated with `flowtrain sample`, not predicted


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("predict", help="run a finished run's model on new inputs (images, CSV, .npy/.npz, text lines)")
    p.add_argument("run", metavar="RUN", help="a completed run's id or name")
    p.add_argument("inputs", metavar="INPUT", nargs="+", type=Path,
                   help="images, folders of images, .csv rows, .npy/.npz arrays (N samples first), "
                        ".txt files of texts (one per line, for a run that tokenizes)")
    p.add_argument("--top", type=int, default=3, help="classification: the K most likely classes (default 3)")
    p.add_argument("--batch", type=int, default=256, help="samples per model call (default 256)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the predictions to FILE (.jsonl or .csv); for a segmentation run, a folder for one "
                        "PNG mask per image and masks.jsonl")
    p.add_argument("--framework", choices=ENGINES, default="onnx",
                   help="the engine: onnx (model.onnx on onnxruntime, the default) or the run's own framework "
                        "(its saved model, in the run's interpreter; compared with model.onnx)")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=cmd_predict)

    m = sub.add_parser("models", help="completed runs' models: id, name, framework, final metric, model.onnx")
    m.add_argument("--json", action="store_true")
    m.add_argument("--user", default=None, help=ADMIN_HELP)
    m.set_defaults(handler=cmd_models)


def cmd_predict(args: argparse.Namespace) -> int:
    if args.top < 1 or args.batch < 1:
        raise CommandError(f"--top {args.top} --batch {args.batch}: both must be positive numbers")
    run = named_run(args)
    task = run.spec().data.task
    if task == LANGUAGE_MODELING:
        raise CommandError(f"run {run.id} ({run.name}) is a language model (data.task {task}): it continues a "
                           "sequence of tokens rather than labelling inputs, so predict cannot run it; generate "
                           f"tokens with `python -m flowtrain sample {run.id} --prompt-ids IDS --tokens N` (the "
                           "prompt's token ids, and how many tokens to add)")
    _check_out(args.out, segmenting=task == SEGMENTATION)
    engine = engine_of(run, args.framework)
    if task == SEGMENTATION:
        return predict_masks(run, engine, args)
    with tempfile.TemporaryDirectory(prefix="flowtrain-predict-") as workdir:
        inputs = prepare_inputs(run.run_dir, args.inputs, Path(workdir), batch=args.batch)
        outputs, through = _outputs(run, engine, inputs, args.batch)
        results = interpret(outputs, inputs, top=args.top, activation=activation_of(run.spec()))
        fitted = (f"statistics of {', '.join(inputs.fitted)} recomputed from the training split"
                  if inputs.fitted else "no fitted statistics")
        del inputs  # its memory-mapped samples live in workdir
    print(f"run {run.id} ({run.name}): {len(results)} sample(s) through {through}, preprocessed by the "
          f"run's data.py ({fitted})")
    if args.out is not None:
        write_predictions(results, args.out)
        print(f"{args.out}: {len(results)} prediction(s)")
    else:
        header, rows = as_rows(results)
        print(text_table([tuple(r) for r in rows], tuple(header)))
    return 0


def _check_out(out: Path | None, *, segmenting: bool) -> None:
    """``--out``: a folder for a segmentation run's masks, else a .jsonl or .csv file."""
    if out is None:
        return
    if segmenting and (out.suffix.lower() in (*OUTPUT_SUFFIXES, ".png") or out.is_file()):
        raise CommandError(f"--out {out}: a segmentation run writes one PNG mask per image, so --out names a "
                           "folder (created if absent), not a file")
    if not segmenting and out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise CommandError(f"--out {out}: name the file .jsonl or .csv (the format follows the extension)")


def predict_masks(run: Run, engine: str, args: argparse.Namespace) -> int:
    """A segmentation run: one mask per input image (PNG files in ``--out``), pixels per class."""
    with tempfile.TemporaryDirectory(prefix="flowtrain-predict-") as workdir:
        inputs = prepare_inputs(run.run_dir, args.inputs, Path(workdir), batch=args.batch)
        if args.out is not None:
            mask_paths(inputs, args.out)  # two masks of one name, or one over an input: refused before any is written
        if engine == "onnx":
            batches, through = onnx_batches(onnx_model_of(run), inputs, batch=args.batch), ONNX_NAME
        else:
            outputs, through = _outputs(run, engine, inputs, args.batch)
            batches = (outputs[i:i + args.batch] for i in range(0, len(outputs), args.batch))
        results = segment(batches, inputs, args.out)
        labels = class_labels(inputs, len(results[0].pixels) if results else 0)
        fitted = (f"statistics of {', '.join(inputs.fitted)} recomputed from the training split"
                  if inputs.fitted else "no fitted statistics")
        model_size = "x".join(map(str, inputs.x.shape[2:]))
        del inputs, batches  # the memory-mapped samples live in workdir
    print(f"run {run.id} ({run.name}): {len(results)} image(s) through {through}, preprocessed by the run's "
          f"data.py ({fitted})")
    resized = sum(r.resized for r in results)
    if resized:
        print(f"{resized} image(s) of another size than the model's input ({model_size}, height x width) were "
              "resized to it (bilinear) and their class scores resized back, so each mask has its image's size")
    if not results:
        print("no images were given (the arrays hold no samples), so no masks")
    elif args.out is not None:
        jsonl = write_mask_records(results, labels, args.out)
        print(f"{args.out}: {len(results)} mask(s), PNG files of class indices 0-{len(labels) - 1} (one per "
              f"image, its size); pixels per class in {jsonl}")
    else:
        header, rows = as_mask_rows(results, labels)
        print(text_table([tuple(r) for r in rows], tuple(header)))
        print("pixels per class of each image's mask; give --out DIR to write the masks as PNG files")
    return 0


def named_run(args: argparse.Namespace) -> Run:
    """The run ``args.run`` names (id or name) for the command's user, its state refreshed when the
    registry last saw it unfinished (it may have ended since; that also writes its model.onnx)."""
    settings = load_settings()
    registry = RunRegistry(home=settings.home)
    user = command_user(settings, args)
    run = find_run(registry, args.run, user)
    if not run.is_final:
        reconcile_quietly(registry, Executors(registry.home), run_ids=[run.id])
        run = registry.get(run.id, user)
    return run


def engine_of(run: Run, engine: str) -> str:
    """``engine`` once the run can be asked with it: completed, with a ``model.onnx`` (onnx) or
    trained by that framework (whose saved model is then read back)."""
    if run.state != RunState.COMPLETED:
        why = f": {run.reason}" if run.reason else ""
        raise CommandError(f"run {run.id} ({run.name}) is {run.state.value}{why}; only a completed run has a "
                           "final model to predict with")
    if engine == "onnx":
        onnx_model_of(run)
    elif engine != run.framework:
        raise CommandError(f"--framework {engine}: run {run.id} ({run.name}) was trained with {run.framework}, so "
                           f"only --framework {run.framework} (its own saved model) or onnx (model.onnx) can "
                           "predict with it")
    return engine


def _outputs(run: Run, engine: str, inputs: Inputs, batch: int) -> tuple[np.ndarray, str]:
    """The model's raw outputs for ``inputs`` and what gave them (said in the first line). A
    framework's outputs are compared with ``model.onnx``'s where the run has one."""
    if engine == "onnx":
        return onnx_outputs(onnx_model_of(run), inputs, batch=batch), ONNX_NAME
    from core.trained import TrainedModelError, read_trained
    from schedulers.model_export import checked_python

    try:
        trained = read_trained(run.run_dir, python=checked_python(run), inputs=np.asarray(inputs.x), batch=batch)
    except TrainedModelError as exc:
        raise CommandError(f"run {run.id} ({run.name}): {exc}", exit_code=1) from None
    assert trained.output is not None  # read_trained returns outputs for the inputs it was given
    through = f"{engine}'s {trained.saved_model}"
    if (run.run_dir / ONNX_NAME).is_file() and len(inputs.x):
        onnx = onnx_outputs(run.run_dir / ONNX_NAME, inputs, batch=batch)
        difference = float(np.max(np.abs(onnx - trained.output)))
        through += f" (largest output difference from {ONNX_NAME}: {difference:.2e}"
        if inputs.task == "classification":
            same = int(np.sum(_top1(onnx) == _top1(trained.output)))
            through += f"; the same top-1 class on {same} of {len(onnx)} samples"
        elif inputs.task == SEGMENTATION:
            same = int(np.sum(np.all(np.argmax(onnx, axis=1) == np.argmax(trained.output, axis=1), axis=(1, 2))))
            through += f"; the same class at every pixel on {same} of {len(onnx)} images"
        through += ")"
    return trained.output, through


def _top1(outputs: np.ndarray) -> np.ndarray:
    flat = np.asarray(outputs).reshape(len(outputs), -1)
    return np.argmax(flat, axis=1) if flat.shape[1] > 1 else (flat[:, 0] > 0).astype(int)


def onnx_model_of(run: Run) -> Path:
    """The run's ``model.onnx``; a :class:`CommandError` saying how to write it when there is none."""
    model = run.run_dir / ONNX_NAME
    if not model.is_file():
        raise CommandError(f"run {run.id} ({run.name}) has no {ONNX_NAME}; write it with "
                           f"`python -m flowtrain export-onnx {run.id} --out {model}`")
    return model


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
    """The headline validation (else test) metric: mean IoU for segmentation, perplexity for a language model,
    accuracy for classifiers, else the loss."""
    headline = ("mIoU", "perplexity", "accuracy", "loss")
    for key in [f"{split}_{name}" for name in headline for split in ("val", "test")]:
        if isinstance(result.get(key), (int, float)):
            return f"{key} {result[key]:.4f}"
    return None
