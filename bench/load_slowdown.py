"""How a calibration job's figures scale with the CPU contention it runs under: the data behind
:mod:`schedulers.contention`'s slowdown model.

    nice -n 19 .venv/bin/python bench/load_slowdown.py [--pipeline mnist_cnn] [--frameworks torch]
                                                        [--hogs 0,2,4,0] [--steps 30] [--settle-s 90]

For each count of hogs in ``--hogs`` (in that order), that many busy loops (``sh -c 'while :; do :; done'``,
started by this script at its own niceness, so at the calibration job's) run beside the machine's other load;
after ``--settle-s`` seconds (the 1-minute load average needs about a minute to show them), one calibration job
per framework of ``--pipeline`` (local scheduler, ``--steps`` timed steps, no window), as
``python -m flowtrain calibrate`` runs it. A row per job: the hogs, the 1-minute load average before and after
the job and the load it ran under as the calibration records it (:func:`schedulers.contention.during`: their
mean, the job's own share out of the second), the mean count of runnable tasks while it ran (``procs_running`` of /proc/stat, sampled every 0.5 s: the
contention without the load average's lag), and the job's figures: step time, validation pass, data and model
start-up, launch (interpreter and imports). Then each figure's slowdown against the first row of the same
framework, beside the model's: ``max(1, (load + threads) / cpus)`` with ``threads`` the program's (this
machine's CPUs, as the generated programs set them), once with the recorded load and once with the runnable
tasks less the job's own threads.

Uses a temporary FLOWTRAIN_HOME; kills its hogs (by their process ids) however it ends.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402
from core.load import spec_from_dict  # noqa: E402
from core.validate import validate  # noqa: E402
from schedulers.calibration import calibrate_selection  # noqa: E402
from schedulers.contention import LOAD_WEIGHT, slowdown  # noqa: E402
from schedulers.launch import Executors, plan  # noqa: E402
from schedulers.speed import SpeedCache  # noqa: E402
from settings import load_settings  # noqa: E402
from settings.access import os_user  # noqa: E402

FIGURES = ("step_s", "val_s", "startup_s", "launch_s")


def procs_running() -> int:
    """Runnable tasks right now (this sampler's own thread among them)."""
    with open("/proc/stat", encoding="ascii") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("procs_running"))


class Sampler:
    """The mean of :func:`procs_running` over a stretch of time, sampled every 0.5 s in a thread."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.samples.append(procs_running() - 1)  # less the sampler itself

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float("nan")


def set_hogs(hogs: list[subprocess.Popen], count: int) -> None:
    while len(hogs) < count:
        hogs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True))
    while len(hogs) > count:
        stop(hogs.pop())


def stop(hog: subprocess.Popen) -> None:
    hog.kill()
    hog.wait()


def model(load: float, threads: int, cpus: int, weight: float = LOAD_WEIGHT) -> float:
    return slowdown(load, threads, cpus, weight)


def best_weight(rows: list[dict], figure: str = "step_s") -> tuple[float, float]:
    """The load weight (0 to 2, in steps of 0.05) whose model predicts each row's ``figure`` from every other row's
    of the same framework best (the least mean squared log ratio), and that worst ratio's size."""
    pairs = [(a, b) for a in rows for b in rows if a is not b and a["fw"] == b["fw"] and a[figure] and b[figure]]
    if not pairs:
        return LOAD_WEIGHT, 1.0

    def errors(w: float) -> list[float]:
        return [math.log(a[figure] * model(b["load"], a["threads"], a["cpus"], w)
                         / model(a["load"], a["threads"], a["cpus"], w) / b[figure]) for a, b in pairs]

    weight = min((i / 20 for i in range(41)), key=lambda w: sum(e * e for e in errors(w)))
    return weight, math.exp(max(abs(e) for e in errors(weight)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="mnist_cnn")
    parser.add_argument("--frameworks", default="torch")
    parser.add_argument("--hogs", default="0,2,4,0")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--settle-s", type=float, default=90.0)
    parser.add_argument("--record", type=Path, default=None,
                        help="write the rows here (JSON), e.g. tests/schedulers/data/load_slowdown.json")
    args = parser.parse_args()
    cpus = os.cpu_count() or 1
    threads = len(os.sched_getaffinity(0))
    spec = spec_from_dict(zoo.template(args.pipeline).model_dump(mode="json"))
    analysis = validate(spec)
    rows: list[dict] = []
    hogs: list[subprocess.Popen] = []
    print(f"{args.pipeline}, {args.steps} timed steps, {cpus} CPUs, the program's threads {threads}, "
          f"niceness {os.nice(0)}; load at the start {os.getloadavg()[0]:.2f}", flush=True)
    try:
        with tempfile.TemporaryDirectory() as home:
            os.environ["FLOWTRAIN_HOME"] = home
            base = load_settings()
            settings = replace(base, selector=replace(base.selector, steps=args.steps, window_s=0))
            executors = Executors(home)
            for i, count in enumerate(int(h) for h in args.hogs.split(",")):
                if i and count != len(hogs) or (i == 0 and count):
                    set_hogs(hogs, count)
                    time.sleep(args.settle_s)  # the bench's own wait: the load average's minute
                for fw in args.frameworks.split(","):
                    selection = plan(spec, scheduler="local", framework=fw, executors=executors, settings=settings,
                                     calibrate=False)
                    one = replace(selection, candidates=[c for c in selection.candidates if c.rank == 1])
                    before = os.getloadavg()[0]
                    with Sampler() as sampler:
                        [r] = calibrate_selection(spec, analysis, one, scheduler="local", executors=executors,
                                                  settings=settings, force=True)
                    after = os.getloadavg()[0]
                    if r.outcome != "measured":
                        print(f"{fw} with {count} hogs: {r.detail}", file=sys.stderr)
                        continue
                    m = SpeedCache(home, os_user()).all()[0]  # newest first: this job's
                    c = m.contention  # as the calibration recorded it (schedulers/contention.py)
                    row = {"fw": fw, "hogs": count, "load": c.load if c else before, "load_before": before,
                           "load_after": after, "runnable": sampler.mean, "cpus": c.cpus if c else cpus,
                           "threads": c.threads if c else threads, **{f: getattr(m, f) for f in FIGURES}}
                    rows.append(row)
                    if args.record is not None:
                        args.record.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
                    print(" ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                          flush=True)
    finally:
        set_hogs(hogs, 0)
    print(table(rows, threads, cpus))
    for figure in FIGURES:
        weight, worst = best_weight(rows, figure)
        shipped = math.exp(max((abs(math.log(a[figure] * model(b["load"], a["threads"], a["cpus"])
                                            / model(a["load"], a["threads"], a["cpus"]) / b[figure]))
                                for a in rows for b in rows if a is not b and a["fw"] == b["fw"]
                                and a[figure] and b[figure]), default=0.0))
        print(f"{figure}: best load weight {weight:.2f} (worst pair x{worst:.2f}); the model's weight "
              f"{LOAD_WEIGHT:g}: worst pair x{shipped:.2f}")
    return 0 if rows else 1


def table(rows: list[dict], threads: int, cpus: int) -> str:
    lines = [f"{'fw':<7}{'hogs':>5}{'load':>18}{'runnable':>9}{'step ms':>9}{'val s':>7}{'start s':>8}"
             f"{'launch s':>9}{'step x':>7}{'val x':>6}{'start x':>8}{'launch x':>9}{'model(load)':>12}"
             f"{'model(run)':>11}"]
    first: dict[str, dict] = {}
    for r in rows:
        base = first.setdefault(r["fw"], r)

        def ratio(name: str, r: dict = r, base: dict = base) -> str:
            return f"{r[name] / base[name]:.2f}" if r[name] and base[name] else "-"

        by_load = model(r["load"], threads, cpus) / model(base["load"], threads, cpus)
        by_run = (model(max(r["runnable"] - threads, 0), threads, cpus)
                  / model(max(base["runnable"] - threads, 0), threads, cpus))
        load = f"{r['load_before']:.1f}->{r['load_after']:.1f}: {r['load']:.1f}"
        lines.append(f"{r['fw']:<7}{r['hogs']:>5}{load:>18}"
                     f"{r['runnable']:>9.1f}{r['step_s'] * 1000:>9.1f}{r['val_s'] or 0:>7.2f}{r['startup_s']:>8.2f}"
                     f"{r['launch_s'] or 0:>9.2f}{ratio('step_s'):>7}{ratio('val_s'):>6}{ratio('startup_s'):>8}"
                     f"{ratio('launch_s'):>9}{by_load:>12.2f}{by_run:>11.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
