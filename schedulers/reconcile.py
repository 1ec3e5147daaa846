"""The registry's runs against their jobs: ask the executors, record what they say.

:func:`reconcile` asks each non-final run's executor for its job (one call per scheduler) and has
the registry record what changed: a job that ended while the portal was down gets its final state
and exit code, a failed one its failing rank's error as its reason (:mod:`schedulers.rank_errors`).
:func:`cancel_run` asks the executor to stop a user's job; :func:`fetch_accounting` asks it once for
a finished job's accounting record. None of them exports a model: a run recorded COMPLETED is
recorded with its ``model.onnx`` pending, which :mod:`schedulers.model_export` writes; so a page that
reconciles waits for the scheduler's answer and nothing more. :func:`follow` is reconcile and then
those exports, for callers that wait anyway (the command line); the portal's pages wake a worker
thread instead (:class:`schedulers.model_export.ExportWorker`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from core.errors import SpecError
from schedulers.base import FINAL_STATES, AccountingExecutor, Executor, JobStatus, RunState, SchedulerError
from schedulers.learning import learn_from_run
from schedulers.rank_errors import Layout, failure_reason
from schedulers.registry.db import RegistryError
from schedulers.registry.files import tail_file
from schedulers.registry.records import ReconcileReport, Run, StateChange
from schedulers.registry.runs import RunRegistry
from schedulers.restarts import RESTART_EVENT, attempts, restart_budget, restart_events

FAILURE_LOG_LINES = 3000  # the end of a failed job's log where its launchers report the failed rank


def reconcile(
    registry: RunRegistry,
    executors: Mapping[str, Executor],
    *,
    run_ids: Sequence[str] | None = None,
    user: str | None = None,
    metrics: bool = True,
) -> ReconcileReport:
    """Ask the executors about every non-final run (or ``run_ids``) and record the changes.

    A scheduler that cannot be asked (Slurm unreachable) is reported in ``errors`` and its runs
    keep their last known state; nothing is guessed.
    """
    report = ReconcileReport()
    runs = registry.active_runs(user)
    if run_ids is not None:
        wanted = set(run_ids)
        runs = [r for r in runs if r.id in wanted]
    by_scheduler: dict[str, list[Run]] = {}
    for run in runs:
        if run.job_id:
            by_scheduler.setdefault(run.scheduler, []).append(run)
    for scheduler, group in by_scheduler.items():
        executor = executors.get(scheduler)
        if executor is None:
            report.errors.append(f"{len(group)} run(s) on scheduler {scheduler!r}, which is not configured "
                                 "here; their state is not refreshed")
            continue
        try:
            statuses = dict(executor.statuses([r.job_id for r in group if r.job_id]))
        except SchedulerError as exc:
            report.errors.append(f"{scheduler}: {exc}")
            continue
        for run in group:
            status = statuses.get(run.job_id or "")
            if status is None:
                continue
            report.checked += 1
            change = _apply(registry, run, status)
            if change:
                report.changes.append(change)
    if metrics:
        for run in runs:
            if run.job_id:
                registry.sync_metrics(run.id)
    return report


def follow(
    registry: RunRegistry,
    executors: Mapping[str, Executor],
    *,
    run_ids: Sequence[str] | None = None,
    user: str | None = None,
    metrics: bool = True,
) -> ReconcileReport:
    """:func:`reconcile`, then write the pending ``model.onnx`` of those runs and log them to MLflow
    where it is set up (any left by a process that died after recording COMPLETED, too)."""
    from schedulers.tracking import after_completion

    report = reconcile(registry, executors, run_ids=run_ids, user=user, metrics=metrics)
    after_completion(registry, run_ids, user)
    return report


def _apply(registry: RunRegistry, run: Run, status: JobStatus) -> StateChange | None:
    tail = None
    if status.state in FINAL_STATES and status.state != RunState.COMPLETED:
        tail = registry.log_tail(run.id)
    if status.state == RunState.FAILED:  # the failing rank's own words, not just "exit code 1"
        log = registry.log_path(run.id)
        reason = failure_reason(run.run_dir, tail_file(log, FAILURE_LOG_LINES) if log else "", run.framework,
                                _layout(registry, run.id))
        status = dataclasses.replace(status, reason=reason or status.reason)
    if run.scheduler == "slurm":
        _record_restarts(registry, run, final=status.state in FINAL_STATES)
    change = registry.record_status(run.id, status, log_tail=tail)
    if change is not None and change.state == RunState.COMPLETED.value:
        learn_from_run(registry, run.id)  # its predicted and actual time; the speed cache learns its figures
    return change


def _record_restarts(registry: RunRegistry, run: Run, final: bool) -> None:
    """Each restart within the allocation that the job log shows, once, as a line of the history
    (:mod:`schedulers.restarts`); they come before the run's final state."""
    log = registry.log_path(run.id)
    text = tail_file(log, FAILURE_LOG_LINES) if log else ""
    if not any(a.number > 1 for a in attempts(text)):
        return
    for detail in restart_events(run.run_dir, text, run.framework, _layout(registry, run.id), restart_count(registry, run.id),
                                 final):
        registry.add_event(run.id, detail)


def restart_count(registry: RunRegistry, run_id: str) -> int:
    """How often the run restarted within its allocation so far (its history's restart lines)."""
    return sum(1 for change in registry.history(run_id) if RESTART_EVENT.match(change.detail))


def restart_tally(registry: RunRegistry, run: Run) -> tuple[int, int | None]:
    """(restarts used, budget) of ``run``, as ``status`` and the Runs page show them (``restarts 1/2``):
    its history's restart lines and its ``training.restarts`` on its scheduler; the budget is ``None``
    for a record whose spec cannot be read."""
    try:
        budget: int | None = restart_budget(run.spec(), run.scheduler)
    except SpecError:
        budget = None
    return restart_count(registry, run.id), budget


def _layout(registry: RunRegistry, run_id: str) -> Layout | None:
    """The run's nodes and processes per node, from its spec; ``None`` for a record without a
    readable spec (the failure reason then rests on the job log and the ranks' files alone)."""
    try:
        resources = registry.get(run_id).spec().training.resources
    except SpecError:
        return None
    return Layout(resources.nodes, resources.gpus_per_node or 1)


def fetch_accounting(registry: RunRegistry, run_id: str, executors: Mapping[str, Executor],
                     user: str | None = None) -> dict[str, Any] | None:
    """The finished run's accounting record, asked of its executor once and kept; ``None`` until the
    backend has one (never for local runs or without slurmdbd). Raises :class:`SchedulerError`."""
    run = registry.get(run_id, user)
    executor = executors.get(run.scheduler)
    if run.accounting is not None or not run.is_final or not run.job_id:
        return run.accounting
    if not isinstance(executor, AccountingExecutor):  # the local machine keeps no accounting
        return None
    record = executor.accounting(run.job_id)
    if record is None:
        return None
    doc = record.to_dict()
    registry.record_accounting(run.id, doc)
    return doc


def cancel_run(registry: RunRegistry, run_id: str, executors: Mapping[str, Executor],
               user: str | None = None) -> Run:
    """Cancel a user's run (another user's is "not found"): the executor is asked to stop the job;
    the state follows by reconcile."""
    run = registry.get(run_id, user)
    if run.is_final:
        return run
    who = f" by {user}" if user else ""
    if not run.job_id:
        registry.record_status(run.id, JobStatus(job_id="", state=RunState.CANCELLED,
                                                 reason=f"cancelled{who} before submission"))
        return registry.get(run_id)
    executor = executors.get(run.scheduler)
    if executor is None:
        raise RegistryError(f"run {run_id} runs on scheduler {run.scheduler!r}, which is not configured here")
    executor.cancel(run.job_id)
    registry.add_event(run.id, f"cancel requested{who}")
    reconcile(registry, executors, run_ids=[run.id], metrics=False)
    return registry.get(run_id)
