"""Scheduler speed: submit, select and the runs list, against the targets of issue 5.

    .venv/bin/python bench/scheduler_speed.py [--repeat N] [--no-slurm]

* submit — spec → select → generated files → local start / sbatch, as ``flowtrain run`` does it
  (``schedulers.launch.submit_run``); target < 1 s. Each submitted job is cancelled at once.
* select — discovery (cached) + the cluster query (sinfo/squeue/scontrol) + the selector;
  target < 0.5 s. The cold discovery probe (importing each framework in its own process) is shown
  for information: it is cached for an hour.
* runs list — 1,000 runs in the registry, newest first; target < 0.2 s.

Uses a temporary FLOWTRAIN_HOME. The Slurm rows need the dev cluster (scripts/devcluster.sh
start; SLURM_CONF from ``scripts/devcluster.sh env``) and are skipped with a note without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.load import load_spec  # noqa: E402
from schedulers.discovery import discover  # noqa: E402
from schedulers.launch import Executors, plan, submit_run  # noqa: E402
from schedulers.registry.runs import RunRegistry  # noqa: E402
from settings import load_settings  # noqa: E402

EXAMPLE = REPO / "examples" / "digits_cnn.json"


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def slurm_conf() -> str | None:
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    proc = subprocess.run(["bash", str(REPO / "scripts" / "devcluster.sh"), "env"], capture_output=True, text=True,
                          check=False)
    for word in proc.stdout.split():
        if word.startswith("SLURM_CONF="):
            return word.split("=", 1)[1]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-slurm", action="store_true")
    args = parser.parse_args()

    rows: list[tuple[str, list[float] | None, float | None, str]] = []
    with tempfile.TemporaryDirectory(prefix="flowtrain-bench-") as tmp:
        home = Path(tmp)
        os.environ["FLOWTRAIN_HOME"] = str(home)
        spec = load_spec(EXAMPLE)
        settings = load_settings()

        cold = timed(lambda: discover(settings.environments, refresh=True), 1)
        rows.append(("discovery, cold probe (cached 1 h)", cold, None, f"{len(settings.environments)} environment(s)"))

        registry = RunRegistry(home=home)
        executors = Executors(home)
        rows.append(("select, local", timed(lambda: plan(spec, scheduler="local", executors=executors),
                                           args.repeat), 0.5, ""))

        def submit_local() -> None:
            run = submit_run(spec, registry=registry, user="bench", scheduler="local", executors=executors,
                             args=("--max-steps", "1"))
            executors["local"].cancel(str(run.job_id))

        rows.append(("submit, local (spec → files → start)", timed(submit_local, args.repeat), 1.0, ""))

        conf = None if args.no_slurm else slurm_conf()
        slurm = None
        if conf:
            os.environ["SLURM_CONF"] = conf
            slurm = Executors(home, slurm_conf=conf)
            if not slurm["slurm"].reachable():  # type: ignore[attr-defined]
                slurm = None
        if slurm is not None:
            rows.append(("select, slurm (incl. sinfo/squeue)",
                         timed(lambda: plan(spec, scheduler="slurm", executors=slurm), args.repeat), 0.5, ""))

            def submit_slurm() -> None:
                run = submit_run(spec, registry=registry, user="bench", scheduler="slurm", executors=slurm,
                                 args=("--max-steps", "1"), job_name="fttest-bench")
                slurm["slurm"].cancel(str(run.job_id))

            rows.append(("submit, slurm (spec → files → sbatch)", timed(submit_slurm, args.repeat), 1.0, ""))
        else:
            rows.append(("select/submit, slurm", None, None, "skipped: dev cluster not running "
                                                             "(scripts/devcluster.sh start)"))

        big = RunRegistry(home=home / "list")
        for i in range(1000):
            run = big.create_run(user=f"user{i % 10}", spec_json=spec.to_json(), spec_hash=spec.spec_hash(),
                                 framework="torch", scheduler="local", name=spec.name)
            big.mark_submitted(run.id, str(i))
        rows.append(("runs list, 1,000 runs (all users)", timed(lambda: big.list_runs(), args.repeat), 0.2, ""))
        rows.append(("runs list, one user's 100 of 1,000", timed(lambda: big.list_runs("user3"), args.repeat),
                     0.2, ""))
        executors["local"].poll()  # type: ignore[attr-defined]

    print(f"{'operation':<42} {'median':>9} {'max':>9} {'target':>8}  ok   note")
    worst = True
    for name, times, target, note in rows:
        if times is None:
            print(f"{name:<42} {'-':>9} {'-':>9} {'-':>8}  -    {note}")
            continue
        med, mx = statistics.median(times), max(times)
        ok = "-" if target is None else ("yes" if med < target else "NO")
        worst = worst and ok != "NO"
        tgt = "-" if target is None else f"{target:g} s"
        print(f"{name:<42} {med * 1000:>7.1f}ms {mx * 1000:>7.1f}ms {tgt:>8}  {ok:<4} {note}")
    return 0 if worst else 1


if __name__ == "__main__":
    sys.exit(main())
