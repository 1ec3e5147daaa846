"""From a spec to a followed run: one way through, in explicit steps, each taking the last one's result.

    load (core.load) → check: pin (data source, init weights) and validate, once → plan: select,
    calibrate where asked → launch: generate, submit, record → follow (schedulers.reconcile)

:func:`submit_run` is that sequence for the command line (``python -m flowtrain run``); the portal
calls the same steps itself (it shows the plan's reasons before launching). No step repeats another's
work: the :class:`Checked` spec carries its :class:`~core.validate.Analysis`, and one executor per
scheduler both submits (the environment's interpreter travels in the job request) and reconciles::

    registry = RunRegistry()                                  # under settings.flowtrain_home()
    executors = Executors(registry.home)
    run = submit_run(spec, registry=registry, user="alice", scheduler="slurm", executors=executors)
    run = wait_for_run(registry, run.id, executors)          # or reconcile(registry, executors) now and then

Slurm configured but unreachable is an error (:class:`~schedulers.base.SchedulerError`), never a
silent switch to the local machine.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import SpecError
from core.spec import PipelineSpec
from core.token_stream import token_stream_problems
from core.validate import Analysis, validate
from core.weights import init_weight_problems
from schedulers.base import Executor, JobRequest, SchedulerError
from schedulers.discovery import EnvironmentReport, discover
from schedulers.local import LocalExecutor
from schedulers.pinning import pin_run
from schedulers.reconcile import follow, reconcile
from schedulers.registry.records import Run, StateChange
from schedulers.registry.runs import RunRegistry
from schedulers.restarts import restart_budget
from schedulers.selector import LOCAL_PARTITION, Selection, select
from schedulers.speed import SpeedBook, SpeedCache
from schedulers.utilisation import PartitionUtilisation
from settings import SCHEDULERS, Settings, load_settings
from settings.access import os_user

if TYPE_CHECKING:
    from schedulers.accounting import Accounting
    from schedulers.slurm.commands import SlurmCommands


class Executors(Mapping[str, Executor]):
    """Scheduler name → executor, built on first use (so a portal without Slurm never calls it).

    ``home``: FLOWTRAIN_HOME of the registry (the local executor keeps its state in ``home/local``).
    """

    def __init__(self, home: str | Path, *, slurm_conf: str | None = None, local_cpus: int | None = None,
                 local_gpus: int | None = None) -> None:
        self.home = Path(home)
        self.slurm_conf = slurm_conf
        self.local_cpus = local_cpus
        self.local_gpus = local_gpus
        self._made: dict[str, Executor] = {}

    def make(self, scheduler: str, python: str | None = None) -> Executor:
        """A fresh executor whose jobs run ``python`` unless their request names an interpreter (a
        submission uses ``self[scheduler]``, the one that also reconciles, and names it there)."""
        if scheduler == "local":
            return LocalExecutor(self.home / "local", python=python, cpus=self.local_cpus, gpus=self.local_gpus)
        if scheduler == "slurm":
            from schedulers.slurm.executor import SlurmExecutor

            return SlurmExecutor(self.slurm_conf, python=python)
        raise SchedulerError(f"unknown scheduler {scheduler!r}; expected {' or '.join(SCHEDULERS)}")

    def __getitem__(self, scheduler: str) -> Executor:
        if scheduler not in self._made:
            if scheduler not in SCHEDULERS:
                raise KeyError(scheduler)
            self._made[scheduler] = self.make(scheduler)
        return self._made[scheduler]

    def __iter__(self) -> Iterator[str]:
        return iter(SCHEDULERS)

    def __len__(self) -> int:
        return len(SCHEDULERS)


def utilisation_for(scheduler: str, executors: Executors) -> dict[str, PartitionUtilisation]:
    """Partition name → utilisation: the Slurm cluster's partitions, or ``{"local": this machine}``."""
    if scheduler == "local":
        local = executors["local"]
        if not isinstance(local, LocalExecutor):
            raise SchedulerError(f"the local executor is a {type(local).__name__}; it cannot report utilisation")
        return {LOCAL_PARTITION: local.utilisation()}
    from schedulers.utilisation import slurm_utilisation

    # Nodes and partitions are read with Slurm's commands whichever transport submits the jobs
    # (``SLURM_CONF`` names the cluster for both; pyslurm sets it when it loads).
    return slurm_utilisation(slurm_commands(executors))


def slurm_commands(executors: Executors) -> SlurmCommands:
    """Slurm's commands for the cluster the Slurm executor drives (nodes, partitions and accounting
    are read with them whichever transport submits the jobs; ``SLURM_CONF`` names the cluster)."""
    from schedulers.slurm.commands import SlurmCommands
    from schedulers.slurm.executor import SlurmExecutor

    slurm = executors["slurm"]
    transport = slurm.commands if isinstance(slurm, SlurmExecutor) else None
    return transport if isinstance(transport, SlurmCommands) else SlurmCommands(slurm_conf=executors.slurm_conf)


def submitting_user(executors: Executors) -> str:
    """The Slurm user jobs are submitted as: the REST transport's token user, else this process's."""
    from schedulers.slurm.executor import SlurmExecutor
    from schedulers.slurm.rest_transport import SlurmRestTransport

    slurm = executors["slurm"]
    if isinstance(slurm, SlurmExecutor) and isinstance(slurm.commands, SlurmRestTransport):
        return slurm.commands.user
    return getpass.getuser()


def accounting_for(executors: Executors, user: str | None = None) -> Accounting | None:
    """The submitting Slurm user's (or ``user``'s) accounts, QoS and limits; ``None`` without slurmdbd."""
    from schedulers.accounting import read_accounting

    return read_accounting(user or submitting_user(executors), slurm_commands(executors))


@dataclass(frozen=True)
class Checked:
    """A spec as its run will read it: pinned for ``user`` (data source and init weights resolved inside
    their roots) and validated once. Every later step takes it; none pins or validates again."""

    spec: PipelineSpec
    analysis: Analysis
    user: str


def check(spec: PipelineSpec, user: str, settings: Settings, spec_dir: Path | None = None) -> Checked:
    """Pin the spec for ``user`` (:func:`schedulers.pinning.pin_run`: a path outside the user's roots, or a
    folder source's member linked outside them, is a
    :class:`~core.errors.SpecError` before anything is created), then validate it: the one validation
    of a submission, with the starting weights' shapes checked against the graph (every misfit node named in
    one problem), and a language model's token stream against its block and vocabulary size. ``spec_dir``: the
    spec file's folder, where ``training.init_weights`` may lie."""
    pinned = pin_run(spec, user, settings, spec_dir)
    analysis = validate(pinned)
    misfit = init_weight_problems(analysis, pinned.training.init_weights)  # before any job, never a traceback in one
    data = pinned.data
    if data.task == "language_modeling" and data.block_size and data.vocab_size:  # a short file, an id ≥ vocab
        misfit += token_stream_problems(data.source, data.block_size, data.vocab_size)
    if misfit:
        raise SpecError(misfit)
    return Checked(pinned, analysis, user)


def plan(
    spec: PipelineSpec | Checked,
    *,
    scheduler: str | None = None,
    framework: str | None = None,
    analysis: Analysis | None = None,
    executors: Executors | None = None,
    settings: Settings | None = None,
    reports: Sequence[EnvironmentReport] | None = None,
    refresh: bool = False,
    slurm_user: str | None = None,
    calibrate: bool | None = None,
    user: str | None = None,
    on_event: Callable[[str], Any] | None = None,
) -> Selection:
    """Discovery (cached) + the scheduler's utilisation (+ accounting on Slurm) + :func:`select`, with
    the speeds cached under the home folder (:mod:`schedulers.speed`).

    ``spec``: a :class:`Checked` spec (a submission: planned as it will run, its analysis reused), or a
    plain one (the ``select`` command, the Cluster page: validated here, or ``analysis`` given).

    ``framework``: ``None``/``"auto"`` lets the selector choose (``spec.training.framework`` counts
    as a preference); a framework name is required, not preferred. ``slurm_user``: whose accounts and
    limits apply (default: the user the Slurm transport submits as). ``calibrate``: first run
    calibration jobs for the feasible candidates without a fresh measurement (default: the setting
    ``[selector] calibrate = "missing"``), as ``user`` (default: the OS user) whose data the spec reads;
    ``on_event`` hears their progress.
    """
    settings = settings or load_settings()
    scheduler = scheduler or settings.scheduler
    if scheduler not in SCHEDULERS:
        raise SchedulerError(f"unknown scheduler {scheduler!r}; expected {' or '.join(SCHEDULERS)}")
    checked = spec if isinstance(spec, Checked) else None
    if checked is not None:
        spec, analysis = checked.spec, checked.analysis
    else:
        analysis = analysis or validate(spec)
    executors = executors or Executors(settings.home)
    if reports is None:
        reports = discover(settings.environments, refresh=refresh)
    util = utilisation_for(scheduler, executors)
    accounting = accounting_for(executors, slurm_user) if scheduler == "slurm" else None
    require = None if framework in (None, "auto") else framework
    speeds = speed_book(settings, user)
    selection = select(spec, analysis, reports, util, scheduler=scheduler, require=require, accounting=accounting,
                       speeds=speeds)
    if calibrate is None:
        calibrate = settings.selector.calibrate == "missing"
    if not calibrate or all(c.speed_source == "measured" for c in selection.candidates if c.feasible):
        return selection
    from schedulers.calibration import calibrate_selection

    # the calibration jobs read the data as the user's run would: a plain spec is pinned for them
    pinned = checked.spec if checked is not None else pin_run(spec, user or os_user(), settings)
    calibrate_selection(pinned, analysis, selection, scheduler=scheduler, executors=executors, settings=settings,
                        on_event=on_event, user=user or os_user())
    util = utilisation_for(scheduler, executors)  # calibration took a while
    return select(spec, analysis, reports, util, scheduler=scheduler, require=require, accounting=accounting,
                  speeds=speeds)


def speed_book(settings: Settings, user: str | None = None) -> SpeedBook:
    """``user``'s measurements (default: the OS user's) cached under the settings' home, with their age limit."""
    return SpeedBook(SpeedCache(settings.home, user), max_age_s=settings.selector.max_age_days * 86400)


def submit_run(
    spec: PipelineSpec,
    *,
    registry: RunRegistry,
    user: str,
    scheduler: str | None = None,
    framework: str | None = None,
    executors: Executors | None = None,
    args: Sequence[str] = (),
    job_name: str | None = None,
    settings: Settings | None = None,
    calibrate: bool | None = None,
    on_event: Callable[[str], Any] | None = None,
    spec_dir: Path | None = None,
) -> Run:
    """check (pin, validate) → plan (select, calibrate) → launch (generate, submit, record).

    ``framework``/``calibrate``/``on_event``: as for :func:`plan`; ``spec_dir``: as for :func:`check`;
    ``args``/``job_name``: as for :func:`launch`.
    """
    settings = settings or load_settings()
    scheduler = scheduler or settings.scheduler
    executors = executors or Executors(registry.home)
    checked = check(spec, user, settings, spec_dir)
    selection = plan(checked, scheduler=scheduler, framework=framework, executors=executors, settings=settings,
                     calibrate=calibrate, user=user, on_event=on_event)
    return launch(checked, selection, registry=registry, scheduler=scheduler, executors=executors, args=args,
                  job_name=job_name)


def launch(
    checked: Checked,
    selection: Selection,
    *,
    registry: RunRegistry,
    scheduler: str,
    executors: Mapping[str, Executor],
    args: Sequence[str] = (),
    job_name: str | None = None,
    before_submit: Callable[[Path], Any] | None = None,
) -> Run:
    """Generate the checked spec's program for the selection into a new run directory, submit it
    through the scheduler's one executor, record it; returns the run.

    The registry stores the pinned spec, which is what the generated program reads. ``args``: extra
    arguments for ``train.py`` (e.g. ``("--max-steps", "20")``). ``before_submit(run_dir)``: runs once
    the program is written, before the job is submitted (a resume copies a checkpoint in). A failure
    after the run was created (generation, submission) marks the run FAILED with the reason, then
    re-raises.
    """
    from core.codegen import generate

    selection = selection.require()
    spec, framework_name = checked.spec, str(selection.framework)
    partition = None if scheduler == "local" else selection.partition
    run = registry.create_run(
        user=checked.user, spec_json=spec.to_json(), spec_hash=spec.spec_hash(), framework=framework_name,
        scheduler=scheduler, name=spec.name, partition=selection.partition, environment=selection.python,
        selection=selection.to_dict(), data_source=spec.data.source,
    )
    try:
        generate(spec, framework_name, checked.analysis).write(run.run_dir)
        if before_submit is not None:
            before_submit(run.run_dir)
        executor = executors.get(scheduler)
        if executor is None:
            raise SchedulerError(f"unknown scheduler {scheduler!r}; expected {' or '.join(SCHEDULERS)}")
        request = JobRequest(
            run_dir=run.run_dir, name=job_name or f"ft-{spec.name}", framework=framework_name,
            resources=replace(selection.resources, partition=partition), args=tuple(args),
            module=selection.module, modulepath=selection.modulepath, python=selection.python,
            restarts=restart_budget(spec, scheduler),
        )
        job_id = executor.submit(request)
    except Exception as exc:
        registry.mark_failed(run.id, f"submission failed: {exc}")
        raise
    registry.mark_submitted(run.id, job_id, f"submitted to {scheduler} as job {job_id}"
                            + (f" on partition {partition}" if partition else ""))
    if spec.training.restarts and scheduler != "slurm":  # said, not silently dropped
        registry.add_event(run.id, f"training.restarts = {spec.training.restarts} applies to Slurm runs only: "
                                   f"this {scheduler} run does not restart")
    reconcile(registry, {scheduler: executor}, run_ids=[run.id], metrics=False)
    return registry.get(run.id)


def wait_for_run(
    registry: RunRegistry,
    run_id: str,
    executors: Mapping[str, Executor],
    *,
    timeout_s: float | None = None,
    interval_s: float = 1.0,
    on_change: Callable[[StateChange], Any] | None = None,
) -> Run:
    """Reconcile the run until it is final (or ``timeout_s`` passes); returns it as last seen.

    Raises :class:`SchedulerError` when its scheduler cannot be asked (e.g. Slurm went away).
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        report = follow(registry, executors, run_ids=[run_id])
        if report.errors:
            raise SchedulerError("; ".join(report.errors))
        for change in report.changes:
            if on_change:
                on_change(change)
        run = registry.get(run_id)
        if run.is_final or (deadline is not None and time.monotonic() >= deadline):
            return run
        time.sleep(interval_s)
