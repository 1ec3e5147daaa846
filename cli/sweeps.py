"""Sweep commands: ``sweep SPEC --sweep SWEEP.json`` (one job array), ``sweeps`` (list them).

``status SWEEP`` and ``cancel SWEEP`` are the run commands given a sweep id (:mod:`cli.runs` hands
them to :func:`show_sweep` and :func:`cancel`). The user is the OS user, as for runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from cli.common import (
    ADMIN_HELP,
    FRAMEWORK_CHOICES,
    SCHEDULER_HELP,
    command_user,
    local_time,
    reconcile_quietly,
    scheduler_errors,
    text_table,
    with_epochs,
)
from core.load import load_spec
from core.sweep import expand_sweep, load_sweep
from schedulers.base import RunState
from schedulers.launch import Executors
from schedulers.registry.records import StateChange
from schedulers.registry.runs import RunRegistry
from schedulers.registry.sweeps import Sweep
from schedulers.sweeps import cancel_sweep, ranked_points, submit_sweep, sweep_counts, wait_for_sweep
from settings import SCHEDULERS, load_settings
from settings.access import listing_user


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sweep", help="run SPEC's variants a sweep file lists, as one job array (docs/sweeps.md)")
    p.add_argument("spec")
    p.add_argument("--sweep", required=True, metavar="SWEEP.json", help="the sweep: method, parameters, budget, "
                   "parallelism, metric")
    p.add_argument("--framework", choices=FRAMEWORK_CHOICES, default="auto")
    p.add_argument("--scheduler", choices=SCHEDULERS, default=None, help=SCHEDULER_HELP)
    p.add_argument("--check", action="store_true", help="only expand and validate every point; submit nothing")
    p.add_argument("--wait", action="store_true", help="follow the sweep until every point ended; exit 0 only if "
                   "all COMPLETED")
    p.add_argument("--timeout", type=float, default=None, help="with --wait: give up after this many seconds")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.add_argument("--epochs", type=int, default=None, help="override training.epochs")
    p.add_argument("--max-steps", type=int, default=None, help="passed to train.py: stop after N optimizer steps")
    p.add_argument("--json", action="store_true", help="print the sweep and its points as JSON at the end")
    p.set_defaults(handler=scheduler_errors(cmd_sweep))

    p = sub.add_parser("sweeps", help="list sweeps, newest first")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.add_argument("--all-users", action="store_true", help="every user's sweeps (administrators only)")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=scheduler_errors(cmd_sweeps))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _value(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def sweep_doc(registry: RunRegistry, sweep: Sweep) -> dict[str, object]:
    doc = sweep.to_dict()
    doc["points"] = [row.to_dict() for row in ranked_points(registry, sweep)]
    return doc


def show_sweep(registry: RunRegistry, sweep: Sweep, as_json: bool, out: TextIO | None = None) -> None:
    """The sweep's points as a table sorted by its metric, the best one marked ``*``."""
    stream = out or sys.stdout
    if as_json:
        print(json.dumps(sweep_doc(registry, sweep), indent=2), file=stream)
        return
    rows = ranked_points(registry, sweep)
    counts = ", ".join(f"{n} {state}" for state, n in sweep_counts([r.run for r in rows]).items())
    print(f"sweep {sweep.id} ({sweep.name}) by {sweep.user}: {len(rows)} points on {sweep.scheduler}, "
          f"{'job array' if sweep.scheduler == 'slurm' else 'local group'} {sweep.job_id or '-'}, at most "
          f"{sweep.parallelism} at once; {counts}", file=stream)
    paths = sweep.paths
    table = [("*" if r.best else "", str(r.point), *(_value(r.values[p]) for p in paths), r.run.state.value,
              _num(r.score), r.run.id) for r in rows]
    header = ("BEST", "POINT", *paths, "STATE", f"{sweep.metric} ({sweep.goal})", "RUN")
    print(text_table(table, header), file=stream)
    best = next((r for r in rows if r.best), None)
    if best is not None:
        print(f"best: point {best.point} ({', '.join(f'{p}={_value(best.values[p])}' for p in paths)}) with "
              f"{sweep.metric} {best.score:.4g}, run {best.run.id}", file=stream)


def cmd_sweep(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = command_user(settings, args)
    spec = with_epochs(load_spec(args.spec), args.epochs)
    sweep = load_sweep(args.sweep)
    out = sys.stderr if args.json else sys.stdout
    if args.check:
        expanded = expand_sweep(spec, sweep)
        for point in expanded.points:
            print(f"point {point.index}: {point.words()}", file=out)
        print(f"{len(expanded.points)} points, every one a valid spec; at most {expanded.parallelism} at once", file=out)
        return 0
    registry = RunRegistry(home=settings.home)
    executors = Executors(registry.home)
    extra = ("--max-steps", str(args.max_steps)) if args.max_steps is not None else ()
    record = submit_sweep(spec, sweep, registry=registry, user=user, scheduler=args.scheduler,
                          framework=args.framework, executors=executors, args=extra, settings=settings,
                          spec_dir=Path(args.spec).parent)
    what = "job array" if record.scheduler == "slurm" else "local group"
    print(f"sweep {record.id}: {len(record.points)} points of {record.name}, {record.framework} on {record.scheduler}, "
          f"{what} {record.job_id}, at most {record.parallelism} at once", file=out)
    print(f"sweep directory: {record.sweep_dir}", file=out)
    if not args.wait:
        if args.json:
            print(json.dumps(sweep_doc(registry, record), indent=2))
        return 0

    def show(change: StateChange) -> None:
        print(f"{local_time(change.time)}  {change.run_id}  {change.state}" + (f"  {change.detail}" if change.detail else ""),
              file=out)

    runs = wait_for_sweep(registry, record.id, executors, timeout_s=args.timeout, on_change=show)
    for run in runs:
        registry.sync_metrics(run.id)
    show_sweep(registry, record, args.json)
    if not all(r.is_final for r in runs):
        print(f"not every point ended after {args.timeout:g} s; follow it with: python -m flowtrain status {record.id}",
              file=out)
        return 1
    return 0 if all(r.state == RunState.COMPLETED for r in runs) else 1


def cmd_sweeps(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = listing_user(settings, args.user, all_users=args.all_users)
    registry = RunRegistry(home=settings.home)
    reconcile_quietly(registry, Executors(registry.home), user=user)
    sweeps = registry.list_sweeps(user, limit=args.limit)
    if args.json:
        print(json.dumps([sweep_doc(registry, s) for s in sweeps], indent=2))
        return 0
    if not sweeps:
        print("no sweeps" + (f" for user {user}" if user else ""))
        return 0
    rows = []
    for s in sweeps:
        ranked = ranked_points(registry, s)
        best = next((r for r in ranked if r.best), None)
        states = ", ".join(f"{n} {st}" for st, n in sweep_counts([r.run for r in ranked]).items())
        rows.append((s.id, s.user, s.name[:30], s.scheduler, s.job_id or "-", str(len(s.points)), states,
                     f"{s.metric} {_num(best.score)} (point {best.point})" if best else "-", local_time(s.created)))
    print(text_table(rows, ("SWEEP", "USER", "NAME", "WHERE", "JOB", "POINTS", "STATES", "BEST", "CREATED")))
    return 0


def cancel(registry: RunRegistry, sweep_id: str, user: str) -> int:
    """``cancel SWEEP``: every point that has not ended, with one cancel of the whole array."""
    runs = cancel_sweep(registry, sweep_id, Executors(registry.home), user=user)
    live = [r for r in runs if not r.is_final]
    print(f"sweep {sweep_id}: " + ", ".join(f"{n} {st}" for st, n in sweep_counts(runs).items())
          + (f" ({len(live)} ending after writing a checkpoint)" if live else ""))
    return 0


def status(registry: RunRegistry, sweep_id: str, user: str, as_json: bool) -> int:
    """``status SWEEP``: the points, refreshed, as a table sorted by the sweep's metric."""
    sweep = registry.get_sweep(sweep_id, user)
    reconcile_quietly(registry, Executors(registry.home), run_ids=[r.id for r in registry.sweep_runs(sweep.id)])
    show_sweep(registry, sweep, as_json)
    return 0
