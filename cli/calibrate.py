"""Speed commands: ``calibrate`` (measure a pipeline on each candidate's hardware) and ``speeds``
(what the cache holds). The selector then ranks by these measurements (docs/selector.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from cli.common import FRAMEWORK_CHOICES, SCHEDULER_HELP, scheduler_errors, text_table
from core.load import load_spec
from core.validate import validate
from schedulers.calibration import CalibrationFailed, calibrate_selection, failures
from schedulers.launch import Executors, plan
from schedulers.pinning import pin_run
from schedulers.speed import SpeedCache
from settings import SCHEDULERS, load_settings
from settings.access import os_user


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("calibrate", help="time a few training steps of SPEC on each feasible framework/partition "
                                         "(calibration jobs); the selector then ranks by the measured speed")
    p.add_argument("spec")
    p.add_argument("--scheduler", choices=SCHEDULERS, default=None, help=SCHEDULER_HELP)
    p.add_argument("--framework", choices=FRAMEWORK_CHOICES, default="auto", help="only this framework")
    p.add_argument("--force", action="store_true", help="measure again even where a fresh measurement is cached")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=scheduler_errors(cmd_calibrate))

    p = sub.add_parser("speeds", help="the cached speed measurements (newest first)")
    p.add_argument("--accuracy", action="store_true", help="the estimates' running error: predicted against actual "
                                                           "time to result of your completed runs, per framework "
                                                           "and partition")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_speeds)


def cmd_calibrate(args: argparse.Namespace) -> int:
    settings = load_settings()
    executors = Executors(settings.home)
    spec = pin_run(load_spec(args.spec), os_user(), settings)
    analysis = validate(spec)
    scheduler = args.scheduler or settings.scheduler
    before = plan(spec, scheduler=scheduler, framework=args.framework, analysis=analysis, executors=executors,
                  settings=settings, calibrate=False)
    before.require()
    say = (lambda text: print(text, file=sys.stderr)) if args.json else print
    results = calibrate_selection(spec, analysis, before, scheduler=scheduler, executors=executors,
                                  settings=settings, force=args.force, on_event=say)
    after = plan(spec, scheduler=scheduler, framework=args.framework, analysis=analysis, executors=executors,
                 settings=settings, calibrate=False)
    if args.json:
        print(json.dumps({"calibrations": [r.to_dict() for r in results], "selection": after.to_dict()}, indent=2))
    else:
        rows = [(r.framework, r.partition, r.environment, f"{r.samples_per_s:,.0f}" if r.samples_per_s else "-",
                 f"{r.step_s * 1000:.1f}" if r.step_s else "-", r.job_id or "-", r.outcome) for r in results]
        print(text_table(rows, ("FRAMEWORK", "PARTITION", "ENVIRONMENT", "SAMPLES/S", "STEP MS", "JOB", "OUTCOME")))
        print("\n".join(after.reasons[:2]))
    failed = failures(results)
    if failed and not any(r.outcome != "failed" for r in results):
        raise CalibrationFailed("no calibration job completed:\n" + failed)
    if failed:
        print("some calibrations failed (those candidates keep the MACs model):\n" + failed, file=sys.stderr)
        return 1
    return 0


def cmd_speeds(args: argparse.Namespace) -> int:
    if args.accuracy:
        return _accuracy(args)
    measurements = SpeedCache(load_settings().home).all()
    if args.json:
        print(json.dumps([asdict(m) for m in measurements], indent=2))
        return 0
    if not measurements:
        print("no measurements yet; run: python -m flowtrain calibrate SPEC")
        return 0
    rows = [(m.framework, m.version, m.environment, m.partition, f"{m.samples_per_s:,.0f}", f"{m.step_s * 1000:.1f}",
             m.scheduler + ":" + m.job_id + ("" if m.source == "calibration" else f" ({m.source})"), time.strftime("%Y-%m-%d %H:%M", time.localtime(m.measured_at)),
             f"{m.contention.load:.1f}/{m.contention.cpus}" if m.contention else "-", m.hardware[:40])
            for m in measurements]
    print(text_table(rows, ("FRAMEWORK", "VERSION", "ENVIRONMENT", "PARTITION", "SAMPLES/S", "STEP MS", "JOB", "MEASURED",
                        "LOAD/CPUS", "NODES")))
    return 0


def _accuracy(args: argparse.Namespace) -> int:
    from schedulers.learning import accuracy, ranking_words, rankings
    from schedulers.registry.runs import RunRegistry

    registry = RunRegistry(home=load_settings().home)
    found, pairs = accuracy(registry, os_user()), rankings(registry, os_user())
    if args.json:
        print(json.dumps({"accuracy": found, "rankings": pairs}, indent=2))
        return 0
    if not found:
        print("no completed run with an estimate yet; the selector's estimate of each run is compared with "
              "what it took once it completes")
        return 0
    rows = [(a["framework"], a["partition"], str(a["runs"]), f"{a['median_ratio']:.2f}",
             f"{a['mean_abs_error_pct']:.0f}%", f"{a['within_25_pct']:.0%}",
             f"{a['latest_ratio']:.2f} ({a['latest_source']})") for a in found]
    print(text_table(rows, ("FRAMEWORK", "PARTITION", "RUNS", "ACTUAL/PREDICTED", "MEAN ERROR", "WITHIN 25%",
                            "LATEST")))
    if pairs:
        print(ranking_words(pairs))
    return 0

