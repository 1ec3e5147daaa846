"""The lockstep table of the zoo (docs/generated-program.md, "The zoo in lockstep"): check-training on each
pipeline with SGD, Adam and AdamW, a row per pipeline, optimizer and framework.

    nice -n 19 .venv/bin/python bench/lockstep_zoo.py [--pipelines mlp mnist_cnn …] [--optimizers sgd adam adamw]
        [--steps 50] [--floor [--floor-samples 3]] [--lr 0.01] [--out rows.json]

Pipelines whose source is not a sklearn dataset train on FlowTrain's small example data (``core/example_data.py``,
``EXAMPLE_SAMPLES``) written to a temporary folder. The template's own optimizer keeps its settings; the others get
``OTHER_OPTIMIZERS``' (the usual rates for the model family). ``SMALLER`` lists what this script shrinks so a
pipeline's three programs train in minutes on a shared two-core machine (each row says so). Each row: the
largest relative loss difference against torch over every step, the largest relative difference of a final
weight array (‖a − b‖ / ‖b‖, the array named), the steps and the wall time of generating and training the
program (start-up included: most of it for the small pipelines), and the bound check-training holds it to
(``LockstepReport.tolerances``: the targets, or with ``--floor`` twice the floor's differences where larger) with
whether it is within. ``--floor`` adds torch trained from ``--floor-samples`` starts one float32 ulp away (each
weight up or down, signs drawn from seeds 1 … N: ``core.lockstep.one_ulp_away``), a row each; the run's float32
floor is the largest of them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402
from core.example_data import write_example_data  # noqa: E402
from core.lockstep import DEFAULT_FLOOR_SAMPLES, FLOOR, check_training  # noqa: E402
from core.spec import PipelineSpec  # noqa: E402

PIPELINES = ("mlp", "mnist_cnn", "lenet5", "resnet18_cifar", "lstm_text_classifier", "transformer_text_classifier")
OPTIMIZERS = ("sgd", "adam", "adamw")
OTHER_OPTIMIZERS: dict[str, dict[str, Any]] = {
    "sgd": {"name": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4},
    "adam": {"name": "adam", "lr": 1e-3},
    "adamw": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.01},
}
# what is changed for a CPU-sized run: (data changes, why)
SMALLER: dict[str, tuple[dict[str, Any], str]] = {
    "resnet18_cifar": ({"batch_size": 16}, "batch 16 (template: 128)"),
    "lstm_text_classifier": ({"max_length": 64}, "sequences of 64 tokens (template: 200)"),
    "transformer_text_classifier": ({"max_length": 64}, "sequences of 64 tokens (template: 200)"),
}
# example samples written per pipeline: enough training batches for the steps within the template's epochs
EXAMPLE_SAMPLES = {"resnet18_cifar": 300, "lstm_text_classifier": 1200, "transformer_text_classifier": 1200}


def spec_for(name: str, optimizer: str, data_root: Path, lr: float | None = None) -> tuple[PipelineSpec, str]:
    """The zoo pipeline `name` with `optimizer` (at learning rate `lr` where given), on example data under
    `data_root` where it reads files; what was changed."""
    template = zoo.template(name)
    doc = template.model_dump(mode="json")
    notes = []
    if doc["training"]["optimizer"]["name"] != optimizer:
        doc["training"]["optimizer"] = OTHER_OPTIMIZERS[optimizer]
    if lr is not None:
        notes.append(f"lr {lr:g} (the row's optimizer: {doc['training']['optimizer']['lr']:g})")
        doc["training"]["optimizer"] = {**doc["training"]["optimizer"], "lr": lr}
    changes, why = SMALLER.get(name, ({}, ""))
    if "batch_size" in changes:
        doc["data"]["batch_size"] = changes["batch_size"]
    if "max_length" in changes:
        for op in doc["data"]["preprocessing"]:
            if op["op"] == "tokenize":
                op["max_length"] = changes["max_length"]
    if why:
        notes.append(why)
    if not template.data.source.startswith("sklearn:"):
        root = data_root / name
        if not root.exists():
            write_example_data(template, root, record=data_root / f"{name}-record.json",
                               samples=EXAMPLE_SAMPLES.get(name, 300))
        doc["data"]["source"] = str(root.resolve() / template.data.source)
        notes.append("example data")
    return PipelineSpec.model_validate(doc), ", ".join(notes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--optimizers", nargs="+", default=list(OPTIMIZERS), choices=OPTIMIZERS)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--floor", action="store_true", help="also torch from starts one float32 ulp away")
    parser.add_argument("--floor-samples", type=int, default=DEFAULT_FLOOR_SAMPLES,
                        help=f"with --floor: how many starts (default {DEFAULT_FLOOR_SAMPLES})")
    parser.add_argument("--out", type=Path, default=None, help="append the rows here (JSON lines)")
    parser.add_argument("--lr", type=float, default=None,
                        help="every optimizer's learning rate (default: the template's, or OTHER_OPTIMIZERS')")
    args = parser.parse_args()
    print("| pipeline | optimizer | framework | loss (max rel. diff) | weights (max rel. diff, array) | bound | "
          "lockstep | steps | wall s | notes |\n|---|---|---|---|---|---|---|---|---|---|", flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="flowtrain-lockstep-zoo-") as tmp:
        for name in args.pipelines:
            for optimizer in args.optimizers:
                spec, notes = spec_for(name, optimizer, Path(tmp), lr=args.lr)
                report = check_training(spec, steps=args.steps, floor=args.floor, floor_samples=args.floor_samples)
                ok = ok and report.ok
                runs = [*report.runs.values(), *report.floors]
                bound = report.tolerances
                for run in runs:
                    row = {"pipeline": name, "optimizer": optimizer, "framework": run.framework,
                           "status": run.status, "loss_diff": run.loss_diff, "weight_diff": run.weight_diff,
                           "worst_weight": run.worst_weight, "steps": args.steps, "seconds": round(run.seconds, 1),
                           "notes": notes, "losses": run.losses, "bound": bound,
                           "lockstep": within(run.loss_diff, run.weight_diff, bound)}
                    if args.out is not None:
                        with args.out.open("a", encoding="utf-8") as out:
                            out.write(json.dumps(row) + "\n")
                    print(markdown_row(row, run.detail), flush=True)
    return 0 if ok else 1


def within(loss_diff: float | None, weight_diff: float | None, bound: tuple[float, float]) -> bool:
    """Whether a run's differences are within the (loss, weight) bound: LockstepReport.ok for one run."""
    return loss_diff is not None and weight_diff is not None and loss_diff <= bound[0] and weight_diff <= bound[1]


def markdown_row(row: dict[str, Any], detail: str) -> str:
    """The row of one run; "bound" is what check-training holds the programs to (the targets, or twice the floor
    run's differences where those are larger: LockstepReport.tolerances)."""
    floor = row["framework"].startswith(FLOOR)
    fw = f"torch, 1 ulp away ({row['framework'].removeprefix(FLOOR + '-')})" if floor else row["framework"]
    bound = f"{row['bound'][0]:.1e} / {row['bound'][1]:.1e}"
    if row["status"] != "ok":
        cells = [f"{row['status']}: {detail[:120]}", "", bound, "no"]
    elif row["framework"] == "torch":
        cells = ["reference", "", "", ""]
    elif floor:
        cells = [f"{row['loss_diff']:.1e}", f"{row['weight_diff']:.1e} ({row['worst_weight']})", "(the floor)", ""]
    else:
        cells = [f"{row['loss_diff']:.1e}", f"{row['weight_diff']:.1e} ({row['worst_weight']})", bound,
                 "yes" if row["lockstep"] else "NO"]
    return (f"| {row['pipeline']} | {row['optimizer']} | {fw} | {' | '.join(cells)} | {row['steps']} | "
            f"{row['seconds']:.0f} | {row['notes']} |")


if __name__ == "__main__":
    sys.exit(main())
