"""The selector's calibration figures: the MNIST CNN (model zoo) timed by calibration jobs in every
framework, as ``python -m flowtrain calibrate`` measures them, repeated and interleaved.

    .venv/bin/python bench/calibration_speed.py [--repeat N] [--steps N] [--scheduler local|slurm]

Prints each framework's median samples/s and step time over the repeats, its ratio to the fastest,
and the time a calibration job took end to end (start-up included). Each repeat measures every
framework once, one after another, so that a change in the machine's load hits all of them alike.
Uses a temporary FLOWTRAIN_HOME; ``--scheduler slurm`` needs the dev cluster (SLURM_CONF from
``scripts/devcluster.sh env``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402
from core.load import spec_from_dict  # noqa: E402
from core.validate import validate  # noqa: E402
from schedulers.calibration import calibrate_selection  # noqa: E402
from schedulers.launch import Executors, plan  # noqa: E402
from settings import load_settings  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--scheduler", choices=("local", "slurm"), default="local")
    args = parser.parse_args()
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    doc["data"]["num_workers"] = 0
    spec = spec_from_dict(doc)
    analysis = validate(spec)
    with tempfile.TemporaryDirectory() as home:
        os.environ["FLOWTRAIN_HOME"] = home
        base = load_settings()
        settings = replace(base, selector=replace(base.selector, steps=args.steps))
        executors = Executors(home)
        selection = plan(spec, scheduler=args.scheduler, executors=executors, settings=settings, calibrate=False)
        rates: dict[str, list[float]] = {}
        steps: dict[str, list[float]] = {}
        walls: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for c in selection.candidates:
                if not c.feasible or c.partition != selection.partition:
                    continue
                one = replace(selection, candidates=[c])
                started = time.perf_counter()
                [r] = calibrate_selection(spec, analysis, one, scheduler=args.scheduler, executors=executors,
                                          settings=settings, force=True)
                if r.outcome != "measured":
                    print(f"{c.framework}: {r.detail}", file=sys.stderr)
                    continue
                rates.setdefault(c.framework, []).append(float(r.samples_per_s or 0))
                steps.setdefault(c.framework, []).append(float(r.step_s or 0))
                walls.setdefault(c.framework, []).append(time.perf_counter() - started)
    if not rates:
        print("no calibration completed")
        return 1
    medians = {fw: statistics.median(v) for fw, v in rates.items()}
    best = max(medians.values())
    print(f"MNIST CNN (mnist_cnn), batch {spec.data.batch_size}, {args.steps} timed steps, {args.scheduler} "
          f"partition {selection.partition}, median of {args.repeat}")
    print(f"{'framework':<10}{'samples/s':>12}{'step ms':>10}{'vs fastest':>12}{'job wall s':>12}")
    for fw in sorted(medians, key=lambda f: -medians[f]):
        print(f"{fw:<10}{medians[fw]:>12,.0f}{statistics.median(steps[fw]) * 1000:>10.1f}"
              f"{medians[fw] / best:>12.2f}{statistics.median(walls[fw]):>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
