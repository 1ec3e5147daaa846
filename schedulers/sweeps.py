"""Sweeps from submission to ranking: every point a run, all points one job array.

    plan = expand_sweep(spec, load_sweep("sweep.json"))          # core.sweep: every point validated
    sweep = submit_sweep(spec, plan.sweep, registry=registry, user="alice", scheduler="slurm")
    rows = ranked_points(registry, sweep)                         # sorted by the sweep's metric, best marked
    cancel_sweep(registry, sweep.id, executors, user="alice")     # one scancel of the array

Submission: the framework, partition and environment are chosen once, for the base spec (one job array
has one set of resources); each point's program is generated into its own run directory
``<home>/runs/<sweep id>-<task id>``; the executor submits them as one group
(:meth:`~schedulers.base.ArrayExecutor.submit_array`): on Slurm one ``sbatch --array=0-N%K`` whose
task ``i`` runs point ``i``; locally a queue group of which at most K run at once. Each point is an
ordinary run (state, history, metrics, directory) with ``sweep_id`` and ``sweep_point`` set, so
``reconcile`` follows it like any other run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.spec import PipelineSpec
from core.sweep import SweepSpec, best_index, expand_sweep
from core.validate import validate
from schedulers.base import ArrayExecutor, ArraySubmission, Executor, JobRequest, JobStatus, RunState, SchedulerError
from schedulers.launch import Executors, plan
from schedulers.pinning import pin_points, pin_run
from schedulers.reconcile import follow, reconcile
from schedulers.registry.records import Run, StateChange
from schedulers.registry.runs import RunRegistry
from schedulers.registry.sweeps import Sweep
from schedulers.restarts import restart_budget
from settings import Settings, load_settings


def submit_sweep(
    spec: PipelineSpec,
    sweep: SweepSpec,
    *,
    registry: RunRegistry,
    user: str,
    scheduler: str | None = None,
    framework: str | None = None,
    executors: Executors | None = None,
    args: Sequence[str] = (),
    settings: Settings | None = None,
    spec_dir: Path | None = None,
) -> Sweep:
    """Pin the data source, expand and validate every point and pin each like a run (its
    ``training.init_weights`` too: :func:`schedulers.pinning.pin_points`; :class:`~core.errors.SpecError`
    with all problems, before anything is created), choose once, generate each point, submit one array,
    record. ``spec_dir``: the folder of the spec file, where ``training.init_weights`` may lie.

    A failure after the runs were created (generation, submission) marks every point FAILED with the
    reason, then re-raises.
    """
    from core.codegen import generate

    settings = settings or load_settings()
    spec = pin_run(spec, user, settings, spec_dir)
    expanded = pin_points(expand_sweep(spec, sweep), user, settings, spec_dir)
    scheduler = scheduler or settings.scheduler
    executors = executors or Executors(registry.home)
    selection = plan(spec, scheduler=scheduler, framework=framework, analysis=validate(spec), executors=executors,
                     settings=settings, user=user).require()
    framework_name = str(selection.framework)
    partition = None if scheduler == "local" else selection.partition
    record = registry.create_sweep(
        user=user, name=spec.name, spec_json=spec.to_json(), sweep_json=sweep.to_json(),
        points=[p.values for p in expanded.points], scheduler=scheduler, framework=framework_name,
        parallelism=expanded.parallelism, metric=sweep.metric.name, goal=sweep.metric.goal)
    runs = []
    for p in expanded.points:  # one point's spec at a time: a thousand of them need not fit at once
        v = expanded.variant_spec(p)
        runs.append(registry.create_run(
            user=user, spec_json=v.to_json(), spec_hash=v.spec_hash(), framework=framework_name,
            scheduler=scheduler, name=v.name, partition=selection.partition, environment=selection.python,
            selection=selection.to_dict(), run_id=f"{record.id}-{p.index}", data_source=v.data.source,
            sweep_id=record.id, sweep_point=p.index))
    try:
        requests = []
        for (_, variant, analysis), run in zip(expanded.variants(), runs, strict=True):
            generate(variant, framework_name, analysis).write(run.run_dir)
            requests.append(JobRequest(
                run_dir=run.run_dir, name=f"ft-{spec.name}", framework=framework_name,
                resources=replace(selection.resources, partition=partition), args=tuple(args),
                module=selection.module, modulepath=selection.modulepath, python=selection.python,
                restarts=restart_budget(spec, scheduler)))  # one job script for the array: the sweep's budget
        executor = executors[scheduler]  # the scheduler's one executor, the one that also reconciles
        if not isinstance(executor, ArrayExecutor):
            raise SchedulerError(f"the {scheduler} executor cannot run a group of jobs (a sweep)")
        submission = executor.submit_array(requests, expanded.parallelism, record.sweep_dir)
    except Exception as exc:
        for run in runs:
            registry.mark_failed(run.id, f"sweep submission failed: {exc}")
        raise
    registry.set_sweep_job(record.id, submission.job_id)
    what = "job array" if scheduler == "slurm" else "local group"
    for run, task in zip(runs, submission.task_ids, strict=True):
        registry.mark_submitted(run.id, task, f"submitted to {scheduler} as task {run.sweep_point} of {what} "
                                f"{submission.job_id}" + (f" on partition {partition}" if partition else ""))
    reconcile(registry, {scheduler: executor}, run_ids=[r.id for r in runs], metrics=False)
    return registry.get_sweep(record.id)


@dataclass(frozen=True)
class PointRow:
    """One point of a sweep as the Runs page and ``status SWEEP`` show it."""

    run: Run
    point: int
    values: dict[str, Any]
    score: float | None  # the sweep's metric from the point's result.json; None until it completed
    best: bool

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run.id, "point": self.point, "values": self.values, "state": self.run.state.value,
                "score": self.score, "best": self.best}


def ranked_points(registry: RunRegistry, sweep: Sweep) -> list[PointRow]:
    """The sweep's points, best first by its metric (points without a score last, in task order)."""
    runs = registry.sweep_runs(sweep.id)
    scores: dict[int, float | None] = {}
    for run in runs:
        result = registry.result(run.id) if run.state == RunState.COMPLETED else None
        value = (result or {}).get(sweep.metric)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        scores[run.sweep_point or 0] = float(value) if ok else None
    best = best_index(scores, sweep.goal)
    rows = [PointRow(run, run.sweep_point or 0, sweep.points[run.sweep_point or 0], scores[run.sweep_point or 0],
                     run.sweep_point == best) for run in runs]
    sign = -1.0 if sweep.goal == "max" else 1.0
    return sorted(rows, key=lambda r: (r.score is None, sign * r.score if r.score is not None else 0.0, r.point))


def sweep_counts(runs: Sequence[Run]) -> dict[str, int]:
    """State → number of points, in the order of :class:`RunState`."""
    counts = {s.value: sum(1 for r in runs if r.state == s) for s in RunState}
    return {k: v for k, v in counts.items() if v}


def cancel_sweep(registry: RunRegistry, sweep_id: str, executors: Mapping[str, Executor],
                 user: str | None = None) -> list[Run]:
    """Cancel every point that has not ended: one cancel of the whole array (Slurm: one ``scancel`` of
    the array job); points not submitted yet are cancelled in the registry. Returns the points."""
    sweep = registry.get_sweep(sweep_id, user)
    runs = registry.sweep_runs(sweep.id)
    live = [r for r in runs if not r.is_final]
    if not live:
        return runs
    who = f" by {user}" if user else ""
    for run in live:
        if not run.job_id:
            registry.record_status(run.id, JobStatus(job_id="", state=RunState.CANCELLED,
                                                     reason=f"sweep cancelled{who} before submission"))
    submitted = [r for r in live if r.job_id]
    if sweep.job_id and submitted:
        executor = executors.get(sweep.scheduler)
        if not isinstance(executor, ArrayExecutor):
            raise SchedulerError(f"sweep {sweep.id} runs on scheduler {sweep.scheduler!r}, which cannot cancel it "
                                 "here (not configured)")
        executor.cancel_array(ArraySubmission(sweep.job_id, tuple(r.job_id for r in submitted if r.job_id)))
        for run in submitted:
            registry.add_event(run.id, f"cancel of sweep {sweep.id} requested{who}")
        reconcile(registry, executors, run_ids=[r.id for r in submitted], metrics=False)
    return registry.sweep_runs(sweep.id)


def wait_for_sweep(
    registry: RunRegistry,
    sweep_id: str,
    executors: Mapping[str, Executor],
    *,
    timeout_s: float | None = None,
    interval_s: float = 1.0,
    on_change: Callable[[StateChange], Any] | None = None,
) -> list[Run]:
    """Reconcile the sweep's points until all are final (or ``timeout_s`` passes); returns them.

    Raises :class:`SchedulerError` when its scheduler cannot be asked."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    ids = [r.id for r in registry.sweep_runs(sweep_id)]
    while True:
        report = follow(registry, executors, run_ids=ids)
        if report.errors:
            raise SchedulerError("; ".join(report.errors))
        for change in report.changes:
            if on_change:
                on_change(change)
        runs = registry.sweep_runs(sweep_id)
        if all(r.is_final for r in runs) or (deadline is not None and time.monotonic() >= deadline):
            return runs
        time.sleep(interval_s)
