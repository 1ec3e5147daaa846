"""Run commands: frameworks, accounts, select, run, runs, status, logs, cancel (``status`` and ``cancel``
also take a sweep id: :mod:`cli.sweeps`).

Settings (home, scheduler, environments) come from :mod:`settings`, exactly as the portal reads them.
The user is the OS user running the command; ``--user NAME`` and ``--all-users`` are for the
administrators named in ``[auth] admins`` (:func:`settings.access.acting_user`).
"""

from __future__ import annotations

import argparse
import codecs
import json
import shutil
import sys
from pathlib import Path

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
from cli.terminal import terminal_text
from core.errors import CommandError, SpecError
from core.frameworks import FRAMEWORKS
from core.load import load_spec
from schedulers.accounting import record_words
from schedulers.base import RunState, SchedulerError
from schedulers.discovery import discover
from schedulers.launch import Executors, accounting_for, plan, submit_run, wait_for_run
from schedulers.model_export import export_note
from schedulers.reconcile import cancel_run, fetch_accounting, restart_count
from schedulers.registry.files import tail_of
from schedulers.registry.records import Run, StateChange
from schedulers.registry.runs import RunRegistry
from schedulers.restarts import restart_budget
from settings import SCHEDULERS, Settings, load_settings
from settings.access import listing_user, os_user

CALIBRATE_HELP = ("first run calibration jobs where no fresh speed measurement is cached (default: the setting "
                  "[selector] calibrate, FLOWTRAIN_CALIBRATE)")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("frameworks", help="frameworks (version, CUDA/CPU build) of each execution environment")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--refresh", action="store_true", help="probe again instead of using the cache")
    p.set_defaults(handler=scheduler_errors(cmd_frameworks))

    p = sub.add_parser("accounts", help="the Slurm accounts and QoS you may use (from slurmdbd)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=scheduler_errors(cmd_accounts))

    p = sub.add_parser("select", help="which framework and partition would run SPEC, and why")
    p.add_argument("spec")
    p.add_argument("--scheduler", choices=SCHEDULERS, default=None, help=SCHEDULER_HELP)
    p.add_argument("--framework", choices=FRAMEWORK_CHOICES, default="auto")
    p.add_argument("--calibrate", action="store_true", help=CALIBRATE_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=scheduler_errors(cmd_select))

    p = sub.add_parser("run", help="generate SPEC's program, submit it and record the run")
    p.add_argument("spec")
    p.add_argument("--framework", choices=FRAMEWORK_CHOICES, default="auto",
                   help="auto: let the selector choose (the spec's framework counts as a preference)")
    p.add_argument("--scheduler", choices=SCHEDULERS, default=None, help=SCHEDULER_HELP)
    p.add_argument("--calibrate", action="store_true", help=CALIBRATE_HELP)
    p.add_argument("--wait", action="store_true", help="follow the run until it ends; exit 0 only if COMPLETED")
    p.add_argument("--timeout", type=float, default=None, help="with --wait: give up after this many seconds")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.add_argument("--epochs", type=int, default=None, help="override training.epochs")
    p.add_argument("--max-steps", type=int, default=None, help="passed to train.py: stop after N optimizer steps")
    p.add_argument("--json", action="store_true", help="print the run as JSON at the end")
    p.set_defaults(handler=scheduler_errors(cmd_run))

    p = sub.add_parser("runs", help="list runs, newest first")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.add_argument("--all-users", action="store_true", help="every user's runs (administrators only)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=scheduler_errors(cmd_runs))

    p = sub.add_parser("status", help="one run: state, history, metrics, artifacts; or a sweep's points, ranked")
    p.add_argument("run")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=scheduler_errors(cmd_status))

    p = sub.add_parser("logs", help="the run's combined stdout/stderr")
    p.add_argument("run")
    p.add_argument("--tail", type=int, default=None, help="only the last N lines")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=scheduler_errors(cmd_logs))

    p = sub.add_parser("fetch", help="copy one file of a run (as `status` lists it) out of its directory")
    p.add_argument("run")
    p.add_argument("path", help="the file's path inside the run directory, e.g. model/model.pt")
    p.add_argument("--out", default=None, help="where to write it (default: its name, in this folder)")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=scheduler_errors(cmd_fetch))

    p = sub.add_parser("cancel", help="stop a run (SIGTERM: it checkpoints, then ends), or every point of a sweep")
    p.add_argument("run")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=scheduler_errors(cmd_cancel))


# --------------------------------------------------------------------------- helpers


def _registry(settings: Settings) -> RunRegistry:
    """The registry under the home folder the settings name (FLOWTRAIN_HOME, the settings file, ./var)."""
    return RunRegistry(home=settings.home)


def _executors(registry: RunRegistry) -> Executors:
    return Executors(registry.home)


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _exit_words(run: Run) -> str:
    if run.signal is not None:
        return f"signal {run.signal}"
    if run.exit_code is not None:
        return f"exit code {run.exit_code}"
    return ""


# --------------------------------------------------------------------------- commands


def cmd_frameworks(args: argparse.Namespace) -> int:
    settings = load_settings()
    reports = discover(settings.environments, refresh=args.refresh)
    if args.json:
        print(json.dumps({"source": settings.environments_source, "environments": [r.to_dict() for r in reports]}, indent=2))
        return 0
    rows = []
    for rep in reports:
        env = rep.environment
        where = ("local, " if env.local else "") + (",".join(env.partitions) if env.partitions else "all partitions")
        if env.module:
            where = f"module {env.module}; {where}"
        for fw in FRAMEWORKS:
            info = rep.frameworks.get(fw)
            if info is None:
                continue
            note = "" if info.installed else (info.error.splitlines()[0][:70] if info.error else "not installed")
            extra = f" (tf {info.backend_version})" if info.backend_version else ""
            rows.append((env.name, fw, (info.version or "-") + extra, info.build, where, note))
    print(text_table(rows, ("ENVIRONMENT", "FRAMEWORK", "VERSION", "BUILD", "WHERE", "NOTE")))
    for rep in reports:
        cached = "cached" if rep.from_cache else "probed"
        py = f"Python {rep.python_version}" if rep.python_version else "Python ?"
        print(f"{rep.environment.name}: {rep.environment.python} ({py}; {cached} {local_time(rep.probed_at)})")
    return 0


def cmd_accounts(args: argparse.Namespace) -> int:
    """What ``sacctmgr show assoc`` says the submitting Slurm user may charge (training.resources
    ``account`` and ``qos``)."""
    acct = accounting_for(Executors(load_settings().home))
    if acct is None:
        raise CommandError("this cluster keeps no accounting database (AccountingStorageType=accounting_storage/none): "
                           "it has no accounts or QoS to choose from", exit_code=1)
    if args.json:
        print(json.dumps(acct.to_dict(), indent=2))
        return 0
    rows = [(a, "yes" if a == acct.default_account else "", ", ".join(acct.qos_of(a))) for a in acct.accounts]
    print(f"Slurm user {acct.user} on cluster {acct.cluster}:")
    print(text_table(rows, ("ACCOUNT", "DEFAULT", "QOS (default first)")) if rows else "  no associations")
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    settings = load_settings()
    spec = load_spec(args.spec)
    selection = plan(spec, scheduler=args.scheduler, framework=args.framework, executors=Executors(settings.home),
                     settings=settings, calibrate=args.calibrate or None,
                     on_event=lambda text: print(text, file=sys.stderr))
    if args.json:
        print(json.dumps(selection.to_dict(), indent=2))
    else:
        print("\n".join(selection.reasons))
    return 0 if selection.ok else 4


def cmd_run(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = command_user(settings, args)
    spec = with_epochs(load_spec(args.spec), args.epochs)
    registry = RunRegistry(home=settings.home)
    executors = Executors(registry.home)
    extra = ("--max-steps", str(args.max_steps)) if args.max_steps is not None else ()
    out = sys.stderr if args.json else sys.stdout
    run = submit_run(spec, registry=registry, user=user, scheduler=args.scheduler, framework=args.framework,
                     executors=executors, args=extra, settings=settings, calibrate=args.calibrate or None,
                     spec_dir=Path(args.spec).parent, on_event=lambda text: print(text, file=out))
    reasons = (run.selection or {}).get("reasons", [])
    for line in reasons[:2]:  # the choice, and each framework's speed and time to result
        print(line, file=out)
    print(f"run {run.id}: {run.framework} on {run.scheduler}"
          + (f" partition {run.partition}" if run.scheduler != "local" else "")
          + f", job {run.job_id}, {run.state.value}", file=out)
    print(f"run directory: {run.run_dir}", file=out)
    if not args.wait:
        if args.json:
            print(json.dumps(run.to_dict(), indent=2))
        return 0

    def show(change: StateChange) -> None:
        print(f"{local_time(change.time)}  {change.state}" + (f"  {change.detail}" if change.detail else ""), file=out)

    run = wait_for_run(registry, run.id, executors, timeout_s=args.timeout, on_change=show)
    registry.sync_metrics(run.id)
    if args.json:
        doc = run.to_dict()
        doc["result"] = registry.result(run.id)
        print(json.dumps(doc, indent=2))
    print(f"{run.state.value}" + (f" ({_exit_words(run)})" if _exit_words(run) else "")
          + (f": {run.reason}" if run.reason and run.state != RunState.COMPLETED else ""), file=out)
    if run.state == RunState.COMPLETED:
        result = registry.result(run.id)
        if result:
            shown = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            print("result: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in shown.items()), file=out)
        note = export_note(registry, run.id)
        if note:
            print(note, file=out)
        return 0
    if not run.is_final:
        print(f"still {run.state.value} after {args.timeout:g} s; follow it with: python -m flowtrain status {run.id}",
              file=out)
        return 1
    if run.log_tail:
        print("last lines of the log:\n" + run.log_tail, file=out)
    return 1


def cmd_runs(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = listing_user(settings, args.user, all_users=args.all_users)
    registry = _registry(settings)
    reconcile_quietly(registry, _executors(registry), user=user)
    runs = registry.list_runs(user, limit=args.limit)
    if args.json:
        print(json.dumps([r.to_dict() for r in runs], indent=2))
        return 0
    rows = [(r.id, r.user, r.name[:30], r.framework, r.scheduler + (f":{r.partition}" if r.scheduler != "local" else ""),
             r.job_id or "-", r.state.value + (f" ({_exit_words(r)})" if r.is_final and _exit_words(r)
                                               and r.state != RunState.COMPLETED else ""),
             local_time(r.created), _dur(r.duration),
             f"{r.sweep_id} #{r.sweep_point}" if r.sweep_id else "-") for r in runs]
    if not rows:
        print("no runs" + (f" for user {user}" if user else ""))
        return 0
    print(text_table(rows, ("RUN", "USER", "NAME", "FRAMEWORK", "WHERE", "JOB", "STATE", "CREATED", "TIME", "SWEEP")))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = command_user(settings, args)
    registry = _registry(settings)
    if registry.is_sweep(args.run):
        from cli import sweeps

        return sweeps.status(registry, args.run, user, args.json)
    registry.get(args.run, user)  # ownership first: "not found" for another user's run
    reconcile_quietly(registry, _executors(registry), run_ids=[args.run])
    registry.sync_metrics(args.run)
    try:
        fetch_accounting(registry, args.run, _executors(registry), user)
    except SchedulerError as exc:
        print(f"warning: no accounting record: {exc}", file=sys.stderr)
    run = registry.get(args.run, user)
    history = registry.history(run.id)
    artifacts = registry.artifacts(run.id)
    last = registry.metrics(run.id)[-5:]
    used, budget = restart_count(registry, run.id), _restart_budget(run)
    if args.json:
        doc = run.to_dict()
        doc["restarts_within_allocation"] = {"used": used, "budget": budget}
        doc["history"] = [h.__dict__ for h in history]
        doc["artifacts"] = [a.to_dict() for a in artifacts]
        doc["result"] = registry.result(run.id)
        doc["last_metrics"] = last
        print(json.dumps(doc, indent=2))
        return 0
    print(f"run {run.id} ({run.name}) by {run.user}")
    print(f"  state      {run.state.value}" + (f" ({_exit_words(run)})" if _exit_words(run) else "")
          + (f", {run.restarts} restart(s)" if run.restarts else "")
          + (f", restarts {used}/{budget}" if budget else ""))
    if run.reason:
        print(f"  reason     {run.reason}")
    print(f"  framework  {run.framework}  scheduler {run.scheduler}"
          + (f"  partition {run.partition}" if run.scheduler != "local" else "") + f"  job {run.job_id or '-'}")
    print(f"  directory  {run.run_dir}")
    print(f"  created {local_time(run.created)}  started {local_time(run.started)}  ended {local_time(run.ended)}  "
          f"time {_dur(run.duration)}")
    if run.accounting:
        print("  sacct      " + record_words(run.accounting))
    print("history:")
    for h in history:
        print(f"  {local_time(h.time)}  {h.state:<9}  {h.detail}")
    if last:
        print("last metrics:")
        for rec in last:
            vals = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in rec.items()
                             if k not in ("time", "elapsed") and not isinstance(v, (dict, list)))
            print(f"  {vals}")
    if artifacts:
        print("artifacts:")
        for a in artifacts:
            print(f"  {a.kind:<10} {a.path}  ({a.size:,} bytes)")
    if run.state in (RunState.FAILED, RunState.NODE_FAIL, RunState.TIMEOUT) and run.log_tail:
        print("last lines of the log:\n" + run.log_tail)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    settings = load_settings()
    registry = _registry(settings)
    user = command_user(settings, args)
    run = registry.get(args.run, user)
    found = registry.open_log(run.id)  # opened once, never through a link: what is printed is the file checked
    if found is None:
        raise CommandError(f"run {run.id} has no log yet (state {run.state.value}); its directory is {run.run_dir}",
                           exit_code=1)
    # Your own log as your program wrote it; another user's (an administrator's --user) with its
    # control characters made visible: that user's program chose every byte of it.
    own = user == os_user()
    with found[1] as fh:
        if args.tail is not None:
            text = tail_of(fh, args.tail)
            sys.stdout.write((text if own else terminal_text(text)) + ("\n" if text else ""))
            return 0
        if own:
            while chunk := fh.read(1 << 16):
                sys.stdout.buffer.write(chunk)
        else:
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            while chunk := fh.read(1 << 16):
                sys.stdout.write(terminal_text(decoder.decode(chunk)))
            sys.stdout.write(terminal_text(decoder.decode(b"", final=True)))
    sys.stdout.flush()
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """One artifact, copied in 1 MiB pieces (files of any size: the portal offers only small ones)."""
    settings = load_settings()
    registry = _registry(settings)
    run = registry.get(args.run, command_user(settings, args))
    out = Path(args.out) if args.out else Path(Path(args.path).name)
    with registry.open_artifact(run.id, args.path) as src:
        try:
            dst = out.open("xb")  # never over an existing file
        except FileExistsError:
            raise CommandError(f"{out} exists already; choose another file with --out", exit_code=1) from None
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror or exc}", exit_code=1) from exc
        with dst:
            try:
                shutil.copyfileobj(src, dst, 1 << 20)
            except OSError as exc:
                dst.close()
                out.unlink(missing_ok=True)  # ours, half written
                raise CommandError(f"cannot write {out}: {exc.strerror or exc}", exit_code=1) from exc
    print(f"{out}: {out.stat().st_size:,} bytes from run {run.id}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    settings = load_settings()
    user = command_user(settings, args)
    registry = _registry(settings)
    if registry.is_sweep(args.run):
        from cli import sweeps

        return sweeps.cancel(registry, args.run, user)
    run = cancel_run(registry, args.run, _executors(registry), user=user)
    print(f"run {run.id}: {run.state.value}" + ("" if run.is_final else " (cancel requested; it ends after "
                                                 "writing a checkpoint)"))
    return 0


def _restart_budget(run: Run) -> int | None:
    """How often the run may restart within its allocation (``training.restarts`` or the scheduler's
    default); ``None`` for a record whose spec cannot be read."""
    try:
        return restart_budget(run.spec(), run.scheduler)
    except SpecError:
        return None
