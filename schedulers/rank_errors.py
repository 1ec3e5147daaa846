"""Why a data-parallel run failed, in the words of the rank that failed first.

A run of several processes fails as a whole (``srun --kill-on-bad-exit`` ends the other ranks at
once), so the scheduler's own reason ("NonZeroExitCode", exit code 1) says nothing about which rank
failed or why, and rank 0's log is the wrong place to look: its own error, if any, is the
consequence ("connection closed by peer"). Two sources name the first failure:

* ``ranks/rank-N.error``: the generated program writes the exception that ends a process there, one
  line, ``rank N (node): Type: message``, just before it exits (``LastError`` of the generated
  runtime.py, templates/common/runtime.py.j2).
  The file written first is the first failure: a rank writes it before its exit closes the
  connections the other ranks then fail on.
* the job log, for a process killed by a signal (it writes nothing): the first launcher report of
  a failed task. torchrun prints a "Root Cause (first observed failure)" block with the worker's
  global rank and ``exitcode: -SIGNAL``; paddle.distributed.launch prints ``Container rank L status
  failed … code -SIGNAL log DIR/workerlog.L`` (its node rank is in its configuration block, told
  apart by DIR); srun prints ``srun: error: NODE: task N: Killed`` (keras: one task per rank).

Nothing here trusts the run directory: files are read without following symbolic links, at most
:data:`MAX_ERROR_BYTES` each, and the reason is one line of at most :data:`MAX_REASON_CHARS`.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from schedulers.registry.files import open_no_follow

MAX_ERROR_BYTES = 4096
MAX_REASON_CHARS = 600
ERROR_FILE = re.compile(r"rank-(\d{1,6})\.error")

_SRUN_TASK = re.compile(r"^srun: error: (?P<node>\S+): tasks? (?P<task>\d+)[\d,\-]*: (?P<what>.+?)\s*$", re.M)
# torchrun (torch.distributed.elastic) prints the first failed worker of its node as a block of "key : value" lines
_TORCHRUN_ROOT = re.compile(r"Root Cause \(first observed failure\):\s*\n(?P<block>(?:.*\n?){1,12})")
_TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)", re.M)
_TORCHRUN_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.M)
# paddle.distributed.launch: its configuration (one block per node's launcher), then per failed worker
# "Container rank <local rank> status failed cmd [...] code <exit code> log <log_dir>/workerlog.<local rank>"
_PADDLE_SETTING = re.compile(r"^LAUNCH INFO \S+ \S+ (?P<key>log_dir|rank|nproc_per_node): (?P<value>\S+)\s*$", re.M)
_PADDLE_FAILED = re.compile(r"^Container rank (?P<local>\d+) status failed .* code (?P<code>-?\d+) log (?P<dir>\S+)/workerlog", re.M)


@dataclass(frozen=True)
class LauncherReport:
    """The failed process a launcher names in the job log; ``signal`` when a signal ended it."""

    rank: int
    signal: int | None = None
    node: str | None = None


def rank_errors(run_dir: Path) -> list[tuple[int, str]]:
    """(rank, its error line) of every ``ranks/rank-N.error``, the first written first."""
    folder = run_dir / "ranks"
    if not folder.is_dir() or folder.is_symlink():
        return []
    found = []
    for path in folder.iterdir():
        match = ERROR_FILE.fullmatch(path.name)
        if not match:
            continue
        try:
            with open_no_follow(path) as fh:
                mtime = os.fstat(fh.fileno()).st_mtime_ns
                text = fh.read(MAX_ERROR_BYTES).decode("utf-8", errors="replace")
        except OSError:  # removed meanwhile, a link, unreadable: it names no failure
            continue
        line = " ".join(text.split())
        if line:
            found.append((mtime, int(match.group(1)), line))
    return [(rank, line) for _, rank, line in sorted(found)]


def launcher_reports(log: str, framework: str) -> list[LauncherReport]:
    """The failed processes that the launchers' lines in the job log name, in log order. Node names
    come from srun's first failed task (torch, paddle: the node whose launcher saw the failure)."""
    srun = list(_SRUN_TASK.finditer(log))
    node = srun[0].group("node") if srun else None
    if framework == "torch":
        reports = []
        for root in _TORCHRUN_ROOT.finditer(log):
            rank, code = _TORCHRUN_RANK.search(root.group("block")), _TORCHRUN_EXIT.search(root.group("block"))
            if rank:
                reports.append(LauncherReport(int(rank.group(1)), _signal(int(code.group(1))) if code else None, node))
        return reports
    if framework == "paddle":
        return _paddle_reports(log, node)
    # keras: one srun task per rank, so srun's task number is the rank
    return [LauncherReport(int(m.group("task")), _SRUN_SIGNALS.get(m.group("what")), m.group("node")) for m in srun]


_SRUN_SIGNALS = {"Killed": signal.SIGKILL, "Terminated": signal.SIGTERM, "Aborted": signal.SIGABRT,
                 "Segmentation fault": signal.SIGSEGV}


def _paddle_reports(log: str, node: str | None) -> list[LauncherReport]:
    """A failed worker's global rank = its launcher's node rank × processes per node + its local rank;
    the launcher is told apart by its log folder (each has its own, printed in its configuration).
    Its node is the one of srun's task with the launcher's node rank (one launcher per node), when
    srun reported that task; else ``node``."""
    nodes = {int(m.group("task")): m.group("node") for m in _SRUN_TASK.finditer(log)}
    launchers: dict[str, tuple[int, int]] = {}  # log_dir -> (node rank, processes per node)
    current: dict[str, str] = {}
    for match in _PADDLE_SETTING.finditer(log):
        current[match.group("key")] = match.group("value")
        if {"log_dir", "rank", "nproc_per_node"} <= current.keys():
            if current["rank"].isdigit() and current["nproc_per_node"].isdigit():
                launchers[current["log_dir"]] = (int(current["rank"]), int(current["nproc_per_node"]))
            current = {}
    reports = []
    for failed in _PADDLE_FAILED.finditer(log):
        node_rank, per_node = launchers.get(failed.group("dir"), (0, 1))
        reports.append(LauncherReport(node_rank * per_node + int(failed.group("local")),
                                      _signal(int(failed.group("code"))), nodes.get(node_rank, node)))
    return reports


def failure_reason(run_dir: Path, log: str, framework: str) -> str | None:
    """The failed run's reason from its ranks, or ``None`` when nothing names the failing rank."""
    errors = rank_errors(run_dir)
    # The first failure a launcher reported: when a signal ended it, that process wrote nothing and
    # the others' errors are its consequences (a rank that wrote its error was not killed first).
    reports = launcher_reports(log, framework)
    report = next(iter(reports), None)
    if framework == "paddle" and report is not None and report.signal == signal.SIGABRT:
        # A paddle worker that aborted itself (gloo's timeout once its peer was gone) may be reported
        # by its launcher before the killed peer's launcher has polled: the killed one is the cause.
        # (srun's own kill-on-bad-exit ends the other launchers, not their workers, with SIGTERM.)
        report = next((r for r in reports if r.signal == signal.SIGKILL), report)
    if report is not None and report.signal is not None and report.rank not in {rank for rank, _ in errors}:
        where = f" ({report.node})" if report.node else ""
        reason = f"rank {report.rank}{where} killed by signal {report.signal} ({_signal_name(report.signal)})"
    elif errors:
        reason = errors[0][1]
    else:
        return None
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


def _signal(exit_code: int) -> int | None:
    """The signal a launcher's negative exit code stands for (Python's ``-SIGNAL`` convention)."""
    return -exit_code if exit_code < 0 else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
