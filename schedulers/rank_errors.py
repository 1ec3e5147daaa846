"""Why a data-parallel run failed: which rank was lost or failed first, whichever launcher spoke first.

A run of several processes fails as a whole (``srun --kill-on-bad-exit`` ends the other ranks at
once), so the scheduler's own reason ("NonZeroExitCode", exit code 1) says nothing about which rank
failed or why, and rank 0's log is the wrong place to look: its own error, if any, is the
consequence ("connection closed by peer"). The order in which the launchers report is a race (the
killed rank's launcher may be ended by srun before it reports at all; a survivor's launcher may
report its self-abort first), so the reason rests on evidence that does not depend on that order:

* ``ranks/rank-N.error``: the generated program writes the exception that ends a process there, one
  line, ``rank N (node): Type: message``, just before it exits (``LastError`` of the generated
  runtime.py, templates/common/runtime.py.j2). An error that only says a peer went away (a closed
  connection, a collective timeout: :data:`_PEER_LOSS`) is a *consequence*; any other is the rank's
  *own* error, and the first own error written is the failure.
* a survivor that names its lost peer: gloo's ``TIMEOUT self_rank = S pair_rank = P`` (paddle's and
  torch's gloo), TensorFlow's ``remote target /job:worker/replica:0/task:P`` (keras), in the job log
  or in a survivor's error file.
* the launchers' reports in the job log, for a process killed by a signal (it writes nothing):
  torchrun's "Root Cause (first observed failure)" block (global rank, ``exitcode: -SIGNAL``);
  paddle.distributed.launch's ``Container rank L status failed … code -SIGNAL log DIR/workerlog.L``
  (its node rank is in its configuration block, told apart by DIR); srun's ``srun: error: NODE:
  task N: Killed`` (keras: one task per rank) — only srun's lines before its own
  ``_step_signal: Terminating`` (after it, a task "Killed" is srun's own kill-on-bad-exit). A
  SIGABRT is a survivor aborting itself on a timeout, a SIGTERM the launchers' and srun's own
  shutdown: neither names a lost rank by itself.
* elimination, when the job's layout is known: the one rank that wrote no error, did not finish
  (``ranks/rank-N.json``), and is not among the survivors that failed waiting for a peer, is lost.

Slurm's accounting has no per-task state (one srun step holds every rank), so it cannot tell the
ranks apart; the node of a rank is srun's task of its node rank (torch, paddle: one launcher per
node; keras: one task per rank).

The reason says what happened: ``rank 1 (n2) lost (killed by signal 9, SIGKILL)``, ``rank 1 (n2)
lost: rank 0 timed out waiting for it``, or the failing rank's own error line.

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
# The line the job script prints before each attempt of the program (templates/slurm/job.sbatch.j2):
# the reason of a run that restarted comes from its last attempt only.
# "flowtrain: attempt A of N on NODE,NODE": the job's nodes in Slurm's order (node rank = index).
ATTEMPT_MARKER = re.compile(r"^flowtrain: attempt \d+ of \d+(?: on (?P<nodes>[A-Za-z0-9_.,\-]+))?[ \t]*$", re.M)

# A node lost under the job (srun's word, or slurmstepd's on the batch node), the job script's line when
# Slurm requeued the job, and its line when it starts no further attempt (templates/slurm/job.sbatch.j2).
_NODE_FAILURE = re.compile(r"^srun: error: Node failure on (?P<node>\S+)", re.M)
_JOB_NODE_FAILURE = re.compile(r"\*\*\* JOB \d+ ON \S+ CANCELLED AT \S+ DUE TO NODE FAILURE", re.M)
_REQUEUED = re.compile(r"^flowtrain: attempt \d+ ended with its allocation: (?P<what>Slurm requeued the job|Slurm started the job again)"
                       r"[^\n]*?(?:; nodes down now: (?P<down>\S+))?[ \t]*$", re.M)
NOT_RESTARTED = re.compile(r"^flowtrain: (?P<why>not (?:re)?started: .+?)[ \t]*$", re.M)
_SRUN_TASK = re.compile(r"^srun: error: (?P<node>\S+): tasks? (?P<task>\d+)[\d,\-]*: (?P<what>.+?)\s*$", re.M)
_SRUN_TERMINATING = re.compile(r"^srun: (?:launch/slurm: _step_signal: Terminating|Job step aborted)", re.M)
# torchrun (torch.distributed.elastic) prints the first failed worker of its node as a block of "key : value" lines
_TORCHRUN_ROOT = re.compile(r"Root Cause \(first observed failure\):\s*\n(?P<block>(?:.*\n?){1,12})")
_TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)", re.M)
_TORCHRUN_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.M)
# paddle.distributed.launch: its configuration (one block per node's launcher), then per failed worker
# "Container rank <local rank> status failed cmd [...] code <exit code> log <log_dir>/workerlog.<local rank>"
_PADDLE_SETTING = re.compile(r"^LAUNCH INFO \S+ \S+ (?P<key>log_dir|rank|nproc_per_node): (?P<value>\S+)\s*$", re.M)
_PADDLE_FAILED = re.compile(r"^Container rank (?P<local>\d+) status failed .* code (?P<code>-?\d+) log (?P<dir>\S+)/workerlog", re.M)
# A survivor naming the peer it waited for: gloo (paddle, torch) and TensorFlow's gRPC collectives (keras).
_GLOO_TIMEOUT = re.compile(r"TIMEOUT self_rank = (?P<by>\d+) pair_rank = (?P<peer>\d+)")
_TF_REMOTE = re.compile(r"remote target /job:worker/replica:\d+/task:(?P<peer>\d+)")
# What a rank says when a peer went away: its error is the consequence, not the cause.
_PEER_LOSS = re.compile(
    r"Connection (?:closed|reset) by peer|remote worker crash|TIMEOUT self_rank|Timed out waiting|"
    r"TimeoutException|Connection was likely closed|DistNetworkError|remote process exited|"
    r"Watchdog caught collective operation timeout|NCCL communicator was aborted|"
    r"Collective ops is aborted|UnavailableError|Socket closed|failed to connect to all addresses|Broken pipe")
# The same as a POSIX extended regular expression, for the job script's grep -E (templates/slurm/job.sbatch.j2)
PEER_LOSS_ERE = _PEER_LOSS.pattern.replace("(?:", "(")
_SHUTDOWN_SIGNALS = {signal.SIGABRT, signal.SIGTERM}  # a survivor's self-abort, a launcher's/srun's shutdown


@dataclass(frozen=True)
class LauncherReport:
    """The failed process a launcher names in the job log; ``signal`` when a signal ended it."""

    rank: int
    signal: int | None = None
    node: str | None = None


@dataclass(frozen=True)
class Layout:
    """The job's ranks: ``nodes`` x ``per_node`` processes; rank R runs on node rank R // per_node."""

    nodes: int
    per_node: int

    @property
    def world(self) -> int:
        return self.nodes * self.per_node


@dataclass(frozen=True)
class PeerLoss:
    """A survivor (``by``, when known) that failed waiting for ``peer``: ``how`` it says so."""

    peer: int
    by: int | None
    how: str  # "timed out waiting for it" | "lost its connection to it"


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


def finished_ranks(run_dir: Path) -> set[int]:
    """Ranks that ended training cleanly: each wrote ``ranks/rank-N.json`` (its weights' digest) last."""
    folder = run_dir / "ranks"
    if not folder.is_dir() or folder.is_symlink():
        return set()
    return {int(m.group(1)) for p in folder.iterdir() if (m := re.fullmatch(r"rank-(\d{1,6})\.json", p.name))}


def last_attempt(log: str) -> tuple[str, list[str]]:
    """The part of the job log after the last attempt marker (all of it when there is none), and the
    job's nodes in node-rank order as the marker lists them (none without one)."""
    markers = list(ATTEMPT_MARKER.finditer(log))
    if not markers:
        return log, []
    nodes = markers[-1].group("nodes")
    return log[markers[-1].end():], nodes.split(",") if nodes else []


def launcher_reports(log: str, framework: str) -> list[LauncherReport]:
    """The failed processes that the launchers' lines in the job log name, in log order. Node names
    come from srun's first failed task (torch: the node whose launcher saw the failure first; its
    rendezvous gives ranks in its own order, not by node), paddle: srun's task of the launcher's
    node rank; keras: srun's task of the rank."""
    srun = list(_SRUN_TASK.finditer(log))
    first_node = srun[0].group("node") if srun else None
    if framework == "torch":
        reports = []
        for root in _TORCHRUN_ROOT.finditer(log):
            rank, code = _TORCHRUN_RANK.search(root.group("block")), _TORCHRUN_EXIT.search(root.group("block"))
            if rank:
                reports.append(LauncherReport(int(rank.group(1)), _signal(int(code.group(1))) if code else None, first_node))
        return reports
    if framework == "paddle":
        return _paddle_reports(log, first_node)
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


def peer_losses(log: str, errors: list[tuple[int, str]]) -> list[PeerLoss]:
    """Every survivor's word on the peer it lost, in the survivors' error files first, then in the log."""
    found = []
    for rank, line in errors:
        for m in _GLOO_TIMEOUT.finditer(line):
            found.append(PeerLoss(int(m.group("peer")), int(m.group("by")), "timed out waiting for it"))
        for m in _TF_REMOTE.finditer(line):
            found.append(PeerLoss(int(m.group("peer")), rank, "lost its connection to it"))
    for m in _GLOO_TIMEOUT.finditer(log):
        found.append(PeerLoss(int(m.group("peer")), int(m.group("by")), "timed out waiting for it"))
    for m in _TF_REMOTE.finditer(log):
        found.append(PeerLoss(int(m.group("peer")), None, "lost its connection to it"))
    return found


def _node_of(rank: int, framework: str, log: str, layout: Layout | None, errors: list[tuple[int, str]],
             nodes: list[str]) -> str | None:
    """The node of ``rank``: keras and paddle place rank R on node rank R // processes per node (srun's
    block distribution; paddle's launcher gets Slurm's node id), ``nodes`` being the job's nodes in
    that order, else srun's task on it. torchrun's rendezvous numbers ranks in its own order, so a
    torch rank's node is the one node whose ranks did not all speak (each survivor's error line
    names its node: ``rank R (node): …``)."""
    tasks = {int(m.group("task")): m.group("node") for m in _SRUN_TASK.finditer(log)}
    if layout is not None and len(nodes) == layout.nodes and framework != "torch":
        return nodes[rank // layout.per_node]
    if framework == "keras":
        return tasks.get(rank)
    if layout is None:
        return None
    if framework == "paddle":
        return tasks.get(rank // layout.per_node)
    known = nodes if len(nodes) == layout.nodes else list(dict.fromkeys(tasks.values()))
    spoke: dict[str, int] = {}
    for _, line in errors:
        if (m := re.match(r"rank \d+ \((?P<node>[^)\s]+)\):", line)):
            spoke[m.group("node")] = spoke.get(m.group("node"), 0) + 1
    short = [node for node in known if spoke.get(node, 0) < layout.per_node]
    return short[0] if len(short) == 1 and len(known) == layout.nodes else None


def node_failure(log: str) -> str | None:
    """What an attempt's part of the job log says of a node lost under it: ``node n2 failed: Slurm
    requeued the job`` (srun names the node when it ran elsewhere; the job script lists the nodes
    still down when the requeued job starts again); ``None`` without such evidence."""
    failed = list(dict.fromkeys(m.group("node") for m in _NODE_FAILURE.finditer(log)))
    requeued = _REQUEUED.search(log)
    if failed:
        said = f"node {', '.join(failed)} failed"
    elif requeued and requeued.group("down"):
        said = f"node {requeued.group('down')} down"
    elif _JOB_NODE_FAILURE.search(log):
        said = "a node of the job failed"
    else:
        return None if requeued is None else requeued.group("what")
    return f"{said}: {requeued.group('what')}" if requeued else said


def failure_reason(run_dir: Path, log: str, framework: str, layout: Layout | None = None) -> str | None:
    """The failed run's reason from its ranks, or ``None`` when nothing names the failing rank.

    ``log``: the end of the job log (only its last attempt counts); ``layout``: the job's nodes and
    processes per node, when known (elimination and the nodes of unreported ranks need it). When the
    job script started no further attempt, its reason follows: ``…; not restarted: <why>``."""
    attempt, _ = last_attempt(log)
    reason = node_failure(attempt) or _rank_reason(run_dir, log, framework, layout)
    stopped = NOT_RESTARTED.search(attempt)
    if stopped is None:
        return reason
    return _short(f"{reason}; {stopped.group('why')}" if reason else stopped.group("why"))


def _rank_reason(run_dir: Path, log: str, framework: str, layout: Layout | None) -> str | None:
    """:func:`failure_reason` from the ranks' own evidence."""
    log, nodes = last_attempt(log)
    errors = rank_errors(run_dir)
    with_error = {rank for rank, _ in errors}
    own = [(rank, line) for rank, line in errors if not _PEER_LOSS.search(line)]
    own_ranks = {rank for rank, _ in own}
    all_reports = reports = launcher_reports(log, framework)
    losses = peer_losses(log, errors)
    # survivors: ranks that failed on a lost peer (their abort is a consequence, never the cause)
    survivors = {loss.by for loss in losses if loss.by is not None} | {r for r, line in errors if _PEER_LOSS.search(line)}
    finished = finished_ranks(run_dir)
    if _PEER_LOSS.search(log):
        # gloo's "Read error [addr]:port: Connection reset by peer" names an address, not a rank: a rank
        # that then aborted itself (SIGABRT, C++'s terminate: no error file) lost its peer, a survivor
        survivors |= {r.rank for r in all_reports if r.signal == signal.SIGABRT and r.rank not in own_ranks}
    if framework == "keras":  # srun's lines after it began killing the other tasks are its own doing
        cut = _SRUN_TERMINATING.search(log)
        reports = [r for r in reports if cut is None or _report_pos(log, r) < cut.start()]

    def lost_reason(rank: int, why: str) -> str:
        # its own launcher's report, wherever it stands (keras: srun's line, even after srun began killing)
        report = next((r for r in all_reports if r.rank == rank and r.signal is not None), None)
        node = _node_of(rank, framework, log, layout, errors, nodes) or (report.node if report else None)
        where = f" ({node})" if node else ""
        if report is not None and report.signal not in _SHUTDOWN_SIGNALS:
            return f"rank {rank}{where} lost (killed by signal {report.signal}, {_signal_name(report.signal)})"
        return f"rank {rank}{where} lost: {why}"

    # 1. a rank a survivor names as the peer it lost, that did not fail on its own
    for loss in losses:
        if loss.peer not in survivors and loss.peer not in own_ranks and loss.peer not in finished:
            by = f"rank {loss.by}" if loss.by is not None else "another rank"
            return _short(lost_reason(loss.peer, f"{by} {loss.how}"))
    # 2. a rank a launcher saw killed by a signal (not a shutdown's), that wrote nothing
    for report in reports:
        if report.signal is not None and report.signal not in _SHUTDOWN_SIGNALS \
                and report.rank not in with_error and report.rank not in survivors:
            return _short(lost_reason(report.rank, "killed"))
    # 3. the first own error written: a rank that raised
    if own:
        return _short(own[0][1])
    # 4. elimination: the one rank that neither finished nor failed waiting for a peer
    if layout is not None and survivors:
        silent = [r for r in range(layout.world) if r not in survivors | with_error | finished]
        if len(silent) == 1:
            first = min(survivors)
            return _short(lost_reason(silent[0], f"it wrote no error and rank {first} failed waiting for it"))
    # 5. what the first launcher report or error file says
    report = next((r for r in reports if r.signal is not None and r.rank not in with_error), None)
    if report is not None:
        where = f" ({report.node})" if report.node else ""
        return _short(f"rank {report.rank}{where} killed by signal {report.signal} ({_signal_name(report.signal)})")
    return _short(errors[0][1]) if errors else None


def _report_pos(log: str, report: LauncherReport) -> int:
    """Where srun's line of a keras report stands in the log."""
    for m in _SRUN_TASK.finditer(log):
        if int(m.group("task")) == report.rank:
            return m.start()
    return len(log)


def _short(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


def _signal(exit_code: int) -> int | None:
    """The signal a launcher's negative exit code stands for (Python's ``-SIGNAL`` convention)."""
    return -exit_code if exit_code < 0 else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
