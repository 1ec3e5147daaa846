"""The selector's time to result against reality: predicted and actual for the zoo's small pipelines.

    .venv/bin/python bench/estimates.py [--pipelines mnist_cnn,mlp,lenet5] [--frameworks torch,keras,paddle]
                                        [--epochs N | --target-s S [--epochs-by middle|slowest]] [--steps N]
                                        [--scheduler local|slurm]
                                        [--record calibrations.json] [--rows rows.json]

Every framework runs the same spec (the same epochs) of a pipeline, so that their ranking can be checked.
``--target-s 90`` chooses each pipeline's epochs so that the middle framework's estimate after calibration is
about 90 s (runs of a minute or more: the issue's bar; the faster frameworks take less, the slower more;
``--epochs-by slowest``: the slowest framework's, every run about that long or less); the
estimate before calibration, taken at one and two epochs, is carried to that count (every part is affine in the
epochs). After each row, a ``phases`` line sets the estimate's parts beside the run's own timings (result.json):
wait, start-up (launch + data and model), training, validation, checkpoints, end; and the load the estimate
scaled the calibration by (docs/selector.md, "Load").

For each pipeline (in order: a later one's estimate before calibration learns from the earlier ones'
measurements, as a user's cache does):

1. for each framework, one after another: the estimate **before** calibration (the learned MACs model, or the
   shipped defaults for the first pipeline), then a calibration job; then the epochs, once for all frameworks;
2. for each framework: the estimate **after** calibration, and the run itself (``run --framework F``), waited
   for: **actual** = submission to the job's end, as the registry records it (the run then teaches the cache:
   :mod:`schedulers.learning`).

Each estimate is printed twice: ``old`` is the formula before the whole run was modelled (wait + the
calibration's start-up + epochs x samples / samples per second; the default MACs rate before
calibration) and ``new`` is :mod:`schedulers.estimate`'s, with its range. The ratio is actual / predicted.
At the end: how many runs of a minute or more were within 25% after calibration and within 2x before it; the
ranking table (every pair of frameworks on one pipeline: whether their actual times differ by more than 25%, and
then whether the estimates after and before calibration put them in the order they finished); and the registry's
ranking check (:func:`schedulers.learning.rankings`: pairs of frameworks the estimates told apart, and whether
they finished in that order).
The machine's load (``uptime``) is printed before and after: timings on a shared machine are noisy.
Uses a temporary FLOWTRAIN_HOME; ``--scheduler slurm`` needs the dev cluster (``scripts/devcluster.sh env``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402
from core.load import spec_from_dict  # noqa: E402
from schedulers import contention, utilisation  # noqa: E402
from schedulers.base import SchedulerError  # noqa: E402
from schedulers.calibration import calibrate_selection  # noqa: E402
from schedulers.launch import Executors, check, launch, plan, speed_book, wait_for_run  # noqa: E402
from schedulers.learning import order_matches, ranking_words, rankings  # noqa: E402
from schedulers.registry.runs import RunRegistry  # noqa: E402
from schedulers.selector import Candidate, Selection  # noqa: E402
from schedulers.speed import SpeedCache, train_macs_per_sample  # noqa: E402
from settings import load_settings  # noqa: E402
from settings.access import os_user  # noqa: E402


def old_estimate(c: Candidate, startup_s: float, samples_per_s: float, epochs: int | None = None) -> float:
    """The time to result as the selector computed it before the whole run was modelled."""
    counts = (c.estimate or {}).get("counts") or {}
    samples = counts.get("train_samples", 0)
    epochs = epochs if epochs is not None else counts.get("epochs", 1)
    return (c.wait_s or 0.0) + startup_s + epochs * samples / max(samples_per_s, 1e-9)


def chosen(selection: Selection) -> Candidate:
    return next(c for c in selection.candidates if c.rank == 1)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def at_epochs(one: Candidate, two: Candidate, epochs: int) -> tuple[float, float, float]:
    """The estimate (time, low, high) at ``epochs`` from the estimates at one and two epochs: every part is
    affine in the epochs (steps, validation passes, checkpoints per epoch), but for the ``every_steps``
    checkpoints' rounding (a fraction of a second)."""
    return tuple(getattr(one, k) + (epochs - 1) * (getattr(two, k) - getattr(one, k))  # type: ignore[return-value]
                 for k in ("finish_s", "low_s", "high_s"))


def epochs_for(target_s: float, one: Candidate, two: Candidate, most: int) -> int:
    """The epochs whose estimate after calibration is nearest ``target_s`` (at least one, at most ``most``)."""
    per_epoch = max(two.finish_s - one.finish_s, 1e-6)
    return min(max(round((target_s - one.finish_s) / per_epoch) + 1, 1), most)


def same_epochs(target_s: float, estimates: list[tuple[Candidate, Candidate]], most: int, by: str = "middle") -> int:
    """One pipeline's epochs for every framework, so that the frameworks run the same spec and their ranking can be
    checked: those whose estimate after calibration is about ``target_s`` for the middle framework (``by="middle"``:
    the median of each framework's own count; the faster ones take less, the slower more) or for the slowest
    (``by="slowest"``: the fewest; every run about ``target_s`` or less, the bench's time bounded)."""
    counts = sorted(epochs_for(target_s, one, two, most) for one, two in estimates)
    return counts[0] if by == "slowest" else counts[(len(counts) - 1) // 2]


def ranking_table(rows: list[tuple]) -> str:
    """Every pair of frameworks run on one pipeline (the same epochs): their actual times, the estimates after and
    before calibration, whether the actual times differ by more than 25%, and then whether each estimate put them
    in the order they finished (``-``: within 25%, either could be first)."""
    lines = [f"{'pipeline':<10}{'pair':<15}{'actual s':>14}{'after s':>14}{'before s':>14}{'differ>25%':>12}"
             f"{'after':>7}{'before':>8}"]
    agreed = {"after": [], "before": []}
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if (b[0], b[2]) != (a[0], a[2]):
                continue
            actual = (a[11], b[11])
            after, before = order_matches((a[8], b[8]), actual), order_matches((a[4], b[4]), actual)
            cells = []
            for key, match in (("after", after), ("before", before)):
                if match is not None:
                    agreed[key].append(match)
                cells.append("-" if match is None else ("yes" if match else "NO"))
            lines.append(f"{a[0]:<10}{a[1] + '/' + b[1]:<15}{f'{a[11]:.1f}/{b[11]:.1f}':>14}"
                         f"{f'{a[8]:.1f}/{b[8]:.1f}':>14}{f'{a[4]:.1f}/{b[4]:.1f}':>14}"
                         f"{'yes' if after is not None else 'no':>12}{cells[0]:>7}{cells[1]:>8}")
    n = len(agreed["after"])
    lines.append(f"ranking where actual times differ by more than 25%: {n} pair(s); in the predicted order after "
                 f"calibration {sum(agreed['after'])}, before {sum(agreed['before'])}")
    return "\n".join(lines)


def phases(a: Candidate, run: Any, result: dict[str, Any] | None) -> str:
    """The run's own timings (result.json) beside the estimate's parts: where a miss comes from. Predicted
    start-up holds the launch, the data and model and the warm-up's compilation; the run's warm-up is in
    its training time, so start and train are compared as their sum too."""
    e = a.estimate or {}
    t = (result or {}).get("timings") or {}
    elapsed = (result or {}).get("elapsed")
    if not t or not isinstance(elapsed, (int, float)) or run.started is None:
        return "  phases: the run wrote no timings"
    launch = run.ended - run.started - elapsed
    pred = [e.get("wait_s") or 0.0, e.get("startup_s", 0.0), e.get("train_s", 0.0), e.get("val_s", 0.0),
            e.get("checkpoint_s", 0.0), e.get("end_s", 0.0)]
    act = [run.started - run.submitted, launch + t.get("startup_s", 0.0), t.get("train_s", 0.0),
           t.get("val_s", 0.0), t.get("checkpoint_s", 0.0), t.get("end_s", 0.0)]
    names = ("wait", "start", "train", "val", "ckpt", "end")
    cells = " ".join(f"{n} {p:.1f}/{q:.1f}" for n, p, q in zip(names, pred, act))
    load = (e.get("load") or {}).get("words")  # the load now against the calibration's (schedulers/contention.py)
    return (f"  phases predicted/actual s: {cells}; start+train {pred[1] + pred[2]:.1f}/{act[1] + act[2]:.1f}"
            f" ({t.get('steps')} steps, {e.get('counts', {}).get('epochs')} epochs)" + (f"; {load}" if load else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", default="mnist_cnn,mlp,lenet5")
    parser.add_argument("--frameworks", default="torch,keras,paddle")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of every run (unless --target-s)")
    parser.add_argument("--target-s", type=float, default=None,
                        help="choose each pipeline's epochs (the same in every framework) so that the middle "
                             "framework's estimate after calibration is about this long")
    parser.add_argument("--epochs-by", choices=("middle", "slowest"), default="middle",
                        help="whose estimate --target-s sets: the middle framework's or the slowest's")
    parser.add_argument("--max-epochs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per calibration job")
    parser.add_argument("--scheduler", choices=("local", "slurm"), default="local")
    parser.add_argument("--record", type=Path, default=None,
                        help="write the calibration jobs' figures here (JSON), e.g. as a test's recorded data")
    parser.add_argument("--rows", type=Path, default=None, help="write the table's rows here (JSON)")
    args = parser.parse_args()
    print(f"load before: {uptime()}", flush=True)
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory() as home:
        os.environ["FLOWTRAIN_HOME"] = home
        base = load_settings()
        settings = replace(base, selector=replace(base.selector, steps=args.steps))
        executors = Executors(home)
        registry = RunRegistry(home=home)
        user = os_user()
        measured: list[tuple[str, Any]] = []
        for name in args.pipelines.split(","):
            def checked(epochs: int, name: str = name) -> Any:
                doc = zoo.template(name).model_dump(mode="json")
                doc["training"]["epochs"] = epochs
                return check(spec_from_dict(doc), user, settings)

            def best(c: Any, fw: str) -> Selection:
                return plan(c, scheduler=args.scheduler, framework=fw, executors=executors, settings=settings,
                            calibrate=False)

            def pair(one: Any, two: Any, fw: str) -> tuple[Selection, Selection]:
                """The estimates at one and two epochs under one reading of the load: the count's estimate is carried
                from their difference, which a reading between them would make the load's (a keras estimate under
                runnable tasks that came and went between the two once came out 4 s, its range from -1 s)."""
                reading = contention.here()
                with mock.patch.object(utilisation, "here", lambda: reading):
                    return best(one, fw), best(two, fw)

            one_epoch, two_epochs = checked(1), checked(2)
            analysis = one_epoch.analysis
            befores = {}  # every framework's estimate before any calibration of this pipeline (a fresh home's first
            for fw in args.frameworks.split(","):  # pipeline: all three from the shipped defaults)
                try:
                    before, two = pair(one_epoch, two_epochs, fw)
                    befores[fw] = (before, chosen(two),
                                   speed_book(settings, user).model_rate(fw, chosen(before).hardware,
                                                                         before.resources, False)[0])
                except SchedulerError as exc:
                    print(f"{name} {fw}: {exc}", file=sys.stderr)
            calibrated: dict[str, tuple[Candidate, Candidate, float, Candidate, Candidate]] = {}
            for fw, (before, b2, rate) in befores.items():  # every framework calibrated first: the epochs are chosen once
                b1 = chosen(before)
                try:
                    [r] = calibrate_selection(one_epoch.spec, analysis, replace(before, candidates=[b1]),
                                              scheduler=args.scheduler, executors=executors, settings=settings,
                                              force=True)
                    if r.outcome != "measured":
                        print(f"{name} {fw}: calibration {r.outcome}: {r.detail}", file=sys.stderr)
                        continue
                    calibrated[fw] = (b1, b2, rate, *(chosen(s) for s in pair(one_epoch, two_epochs, fw)))
                except SchedulerError as exc:  # a shared dev cluster restarted under the bench: the rest goes on
                    print(f"{name} {fw}: {exc}", file=sys.stderr)
            epochs = args.epochs
            if args.target_s is not None and calibrated:
                epochs = same_epochs(args.target_s, [(a1, a2) for *_, a1, a2 in calibrated.values()], args.max_epochs,
                                     args.epochs_by)
            run_spec = checked(epochs)  # the same spec in every framework: their runs can be ranked
            for fw, (b1, b2, rate, _, _) in calibrated.items():
                try:
                    nb, lb, hb = at_epochs(b1, b2, epochs)
                    old_before = old_estimate(b1, 0.0, rate / train_macs_per_sample(analysis), epochs)
                    after = best(run_spec, fw)
                    a = chosen(after)
                    m = SpeedCache(home, user).get(a.speed_key)
                    old_after = old_estimate(a, m.startup_s if m else 0.0, a.samples_per_s or 1e-9)
                    run = launch(run_spec, after, registry=registry, scheduler=args.scheduler, executors=executors)
                    run = wait_for_run(registry, run.id, executors, timeout_s=1800)
                    if run.state.value != "COMPLETED" or run.ended is None or run.submitted is None:
                        print(f"{name} {fw}: run {run.id} ended {run.state.value}: {run.reason}", file=sys.stderr)
                        continue
                    actual = run.ended - run.submitted
                    rows.append((name, fw, epochs, old_before, nb, lb, hb, old_after,
                                 a.finish_s, a.low_s, a.high_s, actual))
                    print_row(rows[-1], header=len(rows) == 1)
                    print(phases(a, run, registry.result(run.id)), flush=True)
                    if args.rows is not None:
                        args.rows.write_text(json.dumps(rows, indent=1) + "\n")
                    if args.record is not None and m is not None:
                        measured.append((name, m))
                        record(args.record, measured)
                except SchedulerError as exc:  # a shared dev cluster restarted under the bench: the rest goes on
                    print(f"{name} {fw}: {exc}", file=sys.stderr)
        print(summary(rows))
        print(ranking_table(rows))
        print(ranking_words(rankings(registry, user)) if rows else "ranking: no runs")
    print(f"load after: {uptime()}")
    return 0 if rows else 1


def summary(rows: list[tuple]) -> str:
    """How many runs of a minute or more (the issue's bar) were within 25% after calibration and within a
    factor of 2 before it, new formula and old."""
    long = [r for r in rows if r[-1] >= 60]
    if not long:
        return f"no run took a minute or more ({len(rows)} shorter): raise --epochs"

    def within(i: int, bound: float) -> int:
        return sum(1 for r in long if 1 / bound <= r[-1] / r[i] <= bound)

    return (f"runs of a minute or more: {len(long)} of {len(rows)}; after calibration within 25%: new {within(8, 1.25)}, "
            f"old {within(7, 1.25)}; before calibration within 2x: new {within(4, 2)}, old {within(3, 2)}")


def record(path: Path, measurements: list[tuple[str, Any]]) -> None:
    """The cache's calibration figures (graph features and terms), for tests/schedulers/data/."""
    keep = ("framework", "hardware", "macs_per_sample", "params", "batch_size", "step_s", "startup_s", "launch_s",
            "warmup_s", "val_first_s", "val_s", "val_samples", "checkpoint_first_s", "checkpoint_s", "end_s", "source",
            "epoch_s", "acts_per_sample")
    path.write_text(json.dumps([{"pipeline": name} | {k: getattr(m, k) for k in keep}
                                | {"contention": m.contention.to_dict() if m.contention else None}
                                for name, m in measurements], indent=1) + "\n")


def print_row(r: tuple, header: bool) -> None:
    name, fw, epochs, ob, nb, lb, hb, oa, na, la, ha, actual = r
    if header:
        print(f"{'pipeline':<10}{'fw':<7}{'epochs':>7}{'before: old':>12}{'ratio':>7}{'new (range)':>20}{'ratio':>7}"
              f"{'after: old':>12}{'ratio':>7}{'new (range)':>20}{'ratio':>7}{'actual s':>10}")
    print(f"{name:<10}{fw:<7}{epochs:>7}{ob:>12.1f}{actual / ob:>7.2f}{f'{nb:.1f} ({lb:.0f}-{hb:.0f})':>20}{actual / nb:>7.2f}"
          f"{oa:>12.1f}{actual / oa:>7.2f}{f'{na:.1f} ({la:.0f}-{ha:.0f})':>20}{actual / na:>7.2f}{actual:>10.1f}",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
