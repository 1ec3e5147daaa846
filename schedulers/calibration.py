"""Calibration jobs: measure this pipeline's training speed on each candidate's hardware.

A calibration job is the generated program itself, run with ``--calibrate N`` (a few warm-up
steps, then N timed optimizer steps; docs/generated-program.md) through the same executor as a
real run (local, or Slurm on the candidate's partition with the spec's per-node request and a
short time limit). It is not a run: it gets no registry entry and no run directory, only a folder
``<home>/calibration/<key>-<framework>/`` (the program, its log and ``calibration.json``), and its
job is named ``ft-calibrate-<pipeline>`` so that ``squeue`` shows what it is. The result goes into
the speed cache (:mod:`schedulers.speed`), where the selector finds it.

Candidates on partitions of the same kind of nodes share one measurement (the cache key holds the
hardware, not the partition name), so one job per (framework, environment, kind of nodes) is run,
one after another: jobs measured side by side on shared nodes would slow each other down.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from core.errors import FlowTrainError
from core.spec import PipelineSpec
from core.validate import Analysis
from schedulers.base import Executor, JobRequest, JobStatus, Resources, SchedulerError
from schedulers.contention import during, here, runnable
from schedulers.registry.files import read_result, tail_file
from schedulers.selector import Candidate, Selection
from schedulers.speed import (
    Measurement,
    SpeedCache,
    speed_key,
    stale_reason,
    train_acts_per_sample,
    train_conv_macs_per_sample,
    train_macs_per_sample,
)
from settings import Settings


class ExecutorSource(Protocol):
    """What calibration needs of :class:`schedulers.launch.Executors` (which calls this module): the
    scheduler's one executor (each job names its interpreter). A protocol, so that this module does
    not import launch back."""

    def __getitem__(self, scheduler: str) -> Executor: ...


JOB_PREFIX = "ft-calibrate"
MAX_STEPS = 400  # the most steps the window ([selector] window_s) may ask for
POLL_S = 0.5
RESULT_FILE = "calibration.json"
REQUIRED = ("samples_per_s", "step_s", "startup_s", "train_samples")


class CalibrationFailed(FlowTrainError):
    """Every calibration job failed; the message lists each one's reason."""

    exit_code = 1


@dataclass(frozen=True)
class CalibrationResult:
    """What happened for one (framework, environment, kind of nodes)."""

    framework: str
    partition: str
    environment: str
    outcome: str  # "measured", "cached" (a fresh measurement exists), "failed"
    job_id: str = ""
    samples_per_s: float | None = None
    step_s: float | None = None
    detail: str = ""  # why it failed, or which other partitions share the measurement

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibration_targets(selection: Selection) -> list[Candidate]:
    """The feasible candidates, in rank order (infeasible ones cannot run a job)."""
    return [c for c in selection.candidates if c.feasible]


def calibrate_selection(
    spec: PipelineSpec,
    analysis: Analysis,
    selection: Selection,
    *,
    scheduler: str,
    executors: ExecutorSource,
    settings: Settings,
    force: bool = False,
    on_event: Callable[[str], Any] | None = None,
    user: str | None = None,
) -> list[CalibrationResult]:
    """Measure every feasible candidate of ``selection`` that has no fresh measurement (all of them
    with ``force``). ``spec`` must be pinned to the user's data already. Returns one result per
    (framework, environment, kind of nodes); failures are results too (:class:`CalibrationFailed`
    is for the caller to raise when it needs a measurement). The measurements are ``user``'s (default:
    the OS user's; :class:`schedulers.speed.SpeedCache`)."""
    say = on_event or (lambda text: None)
    cache = SpeedCache(settings.home, user)
    max_age_s = settings.selector.max_age_days * 86400
    results: list[CalibrationResult] = []
    done: dict[str, CalibrationResult] = {}
    for c in calibration_targets(selection):
        key = speed_key(spec, analysis, c.framework, c.environment or "", c.python or "", c.module, c.hardware,
                        selection.resources)
        if key in done:
            first = done[key]
            results.append(replace(first, partition=c.partition, detail=f"same nodes as {first.partition}: "
                                   f"its measurement is shared" if first.outcome != "failed" else first.detail))
            continue
        cached = cache.get(key)
        if cached is not None and not force and not stale_reason(cached, c.version, max_age_s, time.time()):
            result = CalibrationResult(c.framework, c.partition, c.environment or "", "cached", cached.job_id,
                                       cached.samples_per_s, cached.step_s, "a fresh measurement is cached")
        else:
            steps = timed_steps(c.estimate, settings.selector.steps, settings.selector.window_s)
            say(f"calibrating {c.framework} on {c.partition} ({steps} steps)…")
            try:
                m = run_calibration(spec, analysis, c, key, selection.resources, scheduler=scheduler,
                                    executors=executors, settings=settings)
            except (CalibrationFailed, SchedulerError) as exc:
                result = CalibrationResult(c.framework, c.partition, c.environment or "", "failed", detail=str(exc))
            else:
                cache.put(m)
                result = CalibrationResult(c.framework, c.partition, c.environment or "", "measured", m.job_id,
                                           m.samples_per_s, m.step_s)
            say(_result_words(result))
        done[key] = result
        results.append(result)
    return results


def _result_words(r: CalibrationResult) -> str:
    if r.outcome == "failed":
        return f"{r.framework} on {r.partition}: calibration failed: {r.detail}"
    return f"{r.framework} on {r.partition}: {r.samples_per_s:,.0f} samples/s ({r.outcome}, job {r.job_id})"


def timed_steps(estimate: dict[str, Any] | None, steps: int, window_s: float) -> int:
    """The steps a calibration job times: the setting's ``steps``, or more where the candidate's ``estimate``
    before calibration says they would take under ``window_s`` (``[selector] window_s``; at most :data:`MAX_STEPS`). On a shared node
    the load swings within seconds: ten keras steps of the MNIST CNN took 1.5 s and their step time came
    out anywhere from 0.15 to 0.45 s in consecutive jobs, and a run then averaged 0.31 s; a window of ten
    seconds averages the swings as a run does."""
    planned = (estimate or {}).get("counts", {}).get("steps")
    if not planned or not (estimate or {}).get("train_s"):
        return steps
    per_step = estimate["train_s"] / planned  # type: ignore[index]
    return min(max(steps, math.ceil(window_s / max(per_step, 1e-6))), max(MAX_STEPS, steps))


def run_calibration(
    spec: PipelineSpec,
    analysis: Analysis,
    c: Candidate,
    key: str,
    resources: Resources,
    *,
    scheduler: str,
    executors: ExecutorSource,
    settings: Settings,
) -> Measurement:
    """Generate the program into the calibration folder, submit it with ``--calibrate``, wait for it,
    and read its result. :class:`CalibrationFailed` says why when it does not complete. A local job's
    measurement keeps the machine's load before and after it and the runnable tasks while it ran
    (:mod:`schedulers.contention`): the estimate scales its compute terms by the load a run then starts under."""
    from core.codegen import generate

    folder = settings.home / "calibration" / f"{key[:16]}-{c.framework}"
    if folder.exists():
        shutil.rmtree(folder)  # the previous measurement's files; the cache keeps its result
    generate(spec, c.framework, analysis).write(folder)
    sel = settings.selector
    executor = executors[scheduler]
    request = JobRequest(
        run_dir=folder, name=f"{JOB_PREFIX}-{spec.name}", framework=c.framework,
        resources=replace(resources, partition=None if scheduler == "local" else c.partition,
                          time_limit_min=sel.time_limit_min),
        args=("--calibrate", str(timed_steps(c.estimate, sel.steps, sel.window_s))), module=c.module,
        modulepath=c.modulepath, python=c.python,
    )
    before = here() if scheduler == "local" else None  # a Slurm job's CPUs are its own: uncontended
    submitted = time.time()
    job_id = executor.submit(request)
    start_by = time.monotonic() + sel.queue_wait_s
    end_by = start_by + sel.time_limit_min * 60 + 60
    started = False
    samples: list[int] = []
    while True:
        status = executor.status(job_id)
        if status.state.is_final:
            break
        started = started or status.state.value == "RUNNING"
        seen = runnable() if before is not None and started else None
        if seen is not None:
            samples.append(seen)  # the contention the job runs under, without the load average's lag
        now = time.monotonic()
        if (not started and now > start_by) or now > end_by:
            executor.cancel(job_id)
            waited = (f"had not started after {sel.queue_wait_s:g} s" if not started
                      else f"had not ended after its {sel.time_limit_min} min time limit")
            raise CalibrationFailed(f"job {job_id} on {c.partition} {waited}: cancelled")
        time.sleep(POLL_S)
    ended = time.time()
    contention = during(before, os.getloadavg()[0], ended - submitted, samples) if before is not None else None
    try:
        doc = read_result(folder / RESULT_FILE)
    except (ValueError, OSError) as exc:
        raise CalibrationFailed(f"job {job_id} on {c.partition}: {RESULT_FILE} cannot be read: {exc}") from None
    if status.state.value != "COMPLETED" or doc is None or any(
            not isinstance(doc.get(k), (int, float)) or isinstance(doc.get(k), bool) for k in REQUIRED) \
            or doc["samples_per_s"] <= 0:
        log = executor.log_path(job_id)
        tail = tail_file(log, 8) if log is not None and log.is_file() else "(no log)"
        raise CalibrationFailed(f"job {job_id} on {c.partition} ended {status.state.value}"
                                + (f" ({status.reason})" if status.reason else "")
                                + f" without a {RESULT_FILE}; last lines of its log ({log}):\n{tail}")
    return Measurement(
        key=key, framework=c.framework, version=c.version or "", environment=c.environment or "",
        partition=c.partition, hardware=c.hardware, scheduler=scheduler, job_id=str(job_id),
        measured_at=time.time(), samples_per_s=float(doc["samples_per_s"]), step_s=float(doc["step_s"]),
        startup_s=float(doc["startup_s"]), train_samples=int(doc["train_samples"]),
        macs_per_sample=train_macs_per_sample(analysis), doc=doc, **whole_run_terms(doc, status, submitted, ended),
        params=analysis.total_params, batch_size=spec.data.batch_size,
        conv_macs_per_sample=train_conv_macs_per_sample(analysis), contention=contention,
        acts_per_sample=train_acts_per_sample(analysis),
    )


def whole_run_terms(doc: dict[str, Any], status: JobStatus, submitted: float, seen_ended: float) -> dict[str, Any]:
    """The calibration job's other terms of a whole run (schedulers/estimate.py): what its program timed
    (a first and a steady validation pass and checkpoint, the final model; absent from programs older than
    these figures: a program before the first ones were timed apart gives only its single pass and write) and
    the launch: the job's time from start to end less the program's own clock (the interpreter, the
    framework's import, the process's exit), where the scheduler says when the job started."""
    terms: dict[str, Any] = {name: _number(doc, name) for name in ("warmup_s", "val_first_s", "val_s",
                                                                    "checkpoint_first_s", "checkpoint_s", "end_s",
                                                                    "epoch_s")}
    terms["val_samples"] = int(doc.get("val_samples") or 0)
    elapsed = _number(doc, "elapsed")
    began = status.started if status.started else submitted
    finished = status.ended if status.ended else seen_ended
    if elapsed is not None and finished > began:
        terms["launch_s"] = max(finished - began - elapsed, 0.0)
    return terms


def _number(doc: dict[str, Any], name: str) -> float | None:
    value = doc.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def failures(results: Sequence[CalibrationResult]) -> str:
    """The failed results, one line each ("" when none failed)."""
    return "\n".join(f"  - {r.framework} on {r.partition}: {r.detail}" for r in results if r.outcome == "failed")
