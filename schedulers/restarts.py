"""Restarts within a Slurm allocation: a run whose rank died starts again from its newest checkpoint.

``training.restarts`` (the spec) is the budget: how often ``job.sbatch`` starts the program again
after a failed attempt (default :data:`DEFAULT_RESTARTS`: 2 on Slurm, 0 locally). The job script
(templates/slurm/job.sbatch.j2) runs each attempt as its own ``srun`` step, so srun's
``--kill-on-bad-exit`` still ends a whole attempt at once, and every framework restarts the same way
(torchrun's and paddle's own restarts would mix two attempts' evidence in one step; keras has no
launcher). Before each attempt it prints ``flowtrain: attempt A of N on NODES``; after a failed one it
moves the ranks' error files to ``attempts/A/ranks/``, so that attempt's reason
(:func:`schedulers.rank_errors.failure_reason`) is read from its own files and its own part of the
log. The program resumes by itself (``--resume auto``: the newest checkpoint that loads) and says
from which step (``resumed from … (step N, …)``; nothing when there was no checkpoint yet).

No restart follows an attempt that ended on a signal to the batch shell (the user's ``scancel``,
Slurm's time-limit warning), with exit code 2 (bad data or arguments) or 3 (the program checkpointed
on such a signal), nor one whose ranks' error files say the next would fail the same way: a
``DataError`` on any rank (torchrun reports a worker's exit code 2 as its own 1), an error of its own
on every rank, a write the file system refused (errno 13, 27, 28, 30, 122). The job script says so
(``flowtrain: not restarted: <why>``), and :func:`schedulers.rank_errors.failure_reason` adds it to
the run's reason.

A node lost under the job ends the whole allocation: Slurm requeues the job (``--requeue``; it waits
out the credential lifetime, 120 s by default, before it starts again, on the nodes left). The log is
appended to (``--open-mode=append``) and the attempt each job began is on record in
``attempts/job-<id>.started``, so the requeued job goes on with its next attempt of the same budget,
or fails at once when none is left (a budget of 0 included).

The registry records each restart as a line of the run's history, ``restart 1 of 2: <why>; <from
which step>`` (:func:`restart_events`), once the next attempt has said where it resumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.spec import PipelineSpec
from schedulers.rank_errors import ATTEMPT_MARKER, Layout, failure_reason

DEFAULT_RESTARTS = {"slurm": 2, "local": 0}
ATTEMPTS_DIR = "attempts"  # attempts/<A>/ranks/rank-N.error: the error files of failed attempt A
RESTART_EVENT = re.compile(r"restart (\d+) of (\d+): ")
_RESUMED = re.compile(r"^resumed from \S+ \(step (?P<step>\d+)", re.M)
_TRAINING = re.compile(r"^training on \S+ x\d+:", re.M)


def restart_budget(spec: PipelineSpec, scheduler: str) -> int:
    """How often a run of ``spec`` restarts after a failed attempt: the spec's ``training.restarts``,
    else the scheduler's default. Local runs have no allocation to restart in: always 0 there."""
    if scheduler != "slurm":
        return 0
    chosen = spec.training.restarts
    return DEFAULT_RESTARTS["slurm"] if chosen is None else chosen


@dataclass(frozen=True)
class Attempt:
    number: int  # 1 for the first start
    of: int  # attempts allowed: the budget + 1
    text: str  # the job log from this attempt's marker line (its nodes) to the next one's


def attempts(log: str) -> list[Attempt]:
    """The attempts the job log shows, in order (none for a log without markers)."""
    marks = list(ATTEMPT_MARKER.finditer(log))
    found = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(log)
        number, of = (int(x) for x in re.findall(r"\d+", mark.group(0))[:2])
        found.append(Attempt(number, of, log[mark.start():end]))
    return found


def resumed_from(attempt: Attempt) -> str | None:
    """Where an attempt's program started: its resume line, or step 0 once it trains without one;
    ``None`` while it has said neither."""
    if (m := _RESUMED.search(attempt.text)):
        return f"resumed from step {m.group('step')}"
    if _TRAINING.search(attempt.text):
        return "started again from step 0 (no checkpoint yet)"
    return None


def restart_events(run_dir: Path, log: str, framework: str, layout: Layout | None, recorded: int,
                   final: bool) -> list[str]:
    """History lines for the restarts after the first ``recorded`` ones: why the attempt before each
    failed (its own error files and log) and from which step the next one went on. A restart waits
    until its attempt says where it resumed, unless the run has ended (``final``) or a later
    attempt began."""
    shown = {a.number: a for a in attempts(log)}
    events = []
    for number in sorted(shown):
        if number < 2 or number - 1 <= recorded:
            continue
        restart, after = number - 1, shown[number]
        where = resumed_from(after)
        if where is None:
            if not final and number + 1 not in shown:
                break  # not said yet: the next reconcile records it
            where = "ended before it resumed"
        failed = shown.get(restart)
        reason = failure_reason(run_dir / ATTEMPTS_DIR / str(restart), failed.text if failed else "", framework,
                                layout) if failed else None
        events.append(f"restart {restart} of {after.of - 1}: {reason or f'attempt {restart} failed'}; {where}")
    return events
