"""``python -m flowtrain tensorboard [RUN…]``: TensorBoard on the user's runs.

Every generated program writes TensorBoard event files to ``tb/`` in its run folder (beside
``metrics.jsonl``; ``templates/common/_tb_events.py.j2``). This command starts TensorBoard (this
environment's ``tensorboard`` package) on those folders, one TensorBoard run per FlowTrain run named
``<name>-<id>``, listening on 127.0.0.1 and a free port, and prints the address; Ctrl-C stops it.
Without RUN: all the user's runs that have event files.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import signal
import socket
import subprocess
import sys

from cli.common import ADMIN_HELP, command_user
from core.errors import CommandError
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from schedulers.run_lookup import find_run
from settings import load_settings

TB_FOLDER = "tb"
# TensorBoard without TensorFlow: its own stub reads scalars, and starts in seconds rather than the
# minute importing TensorFlow takes (an empty ``tensorboard.compat.notf`` is TensorBoard's switch).
TB_MAIN = ("import sys, types; sys.modules['tensorboard.compat.notf'] = types.ModuleType('tensorboard.compat.notf'); "
           "from tensorboard.main import run_main; run_main()")
UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("tensorboard", help="TensorBoard on your runs' event files (127.0.0.1, a free port)")
    p.add_argument("runs", metavar="RUN", nargs="*", help="run ids or names (default: all your runs with event files)")
    p.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one)")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=cmd_tensorboard)


def cmd_tensorboard(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("tensorboard") is None:
        raise CommandError("the tensorboard package is not installed in this environment; scripts/setup.sh installs "
                           "it (requirements.txt), or `pip install tensorboard`", exit_code=1)
    settings = load_settings()
    registry = RunRegistry(home=settings.home)
    user = command_user(settings, args)
    runs = [find_run(registry, ref, user) for ref in args.runs] if args.runs else registry.list_runs(user)
    spec, without = logdir_spec(runs)
    if not spec:
        named = ", ".join(r.id for r in without[:5]) or "none"
        raise CommandError(f"no event files to show: {len(without)} run(s) without {TB_FOLDER}/ ({named}); runs "
                           "write them as they train")
    port = args.port or free_port()
    if without and args.runs:
        print(f"note: {', '.join(r.id for r in without)} wrote no event files ({TB_FOLDER}/); not shown")
    print(f"TensorBoard on http://127.0.0.1:{port}/ for {len(spec)} run(s); Ctrl-C stops it", flush=True)
    cmd = [sys.executable, "-c", TB_MAIN, "--host", "127.0.0.1", "--port", str(port),
           "--logdir_spec", ",".join(f"{name}:{path}" for name, path in spec)]
    return serve(cmd)


def serve(cmd: list[str]) -> int:
    """Run TensorBoard until it ends, or until this command is stopped: Ctrl-C or a SIGTERM (a batch
    system's, a session's end) stops TensorBoard too, never leaving it serving with no parent."""
    server = subprocess.Popen(cmd)

    def stop(signum: int, frame: object) -> None:
        server.terminate()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return server.wait()
    except KeyboardInterrupt:
        server.terminate()
        server.wait()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def logdir_spec(runs: list[Run]) -> tuple[list[tuple[str, str]], list[Run]]:
    """``(name, tb folder)`` for each run that has event files, and the runs that have none."""
    spec, without = [], []
    for run in runs:
        folder = run.run_dir / TB_FOLDER
        if not (folder.is_dir() and any(folder.glob("events.out.tfevents.*"))):
            without.append(run)
            continue
        if "," in str(folder) or ":" in str(folder):
            raise CommandError(f"run {run.id}: its folder {folder} has a ',' or ':', which TensorBoard's "
                               "--logdir_spec cannot take; open it with `tensorboard --logdir` instead")
        spec.append((f"{UNSAFE.sub('_', run.name)}-{run.id}", str(folder)))
    return spec, without


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
