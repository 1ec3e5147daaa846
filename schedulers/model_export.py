"""Every completed run gets ``model.onnx``, whatever its framework, off the path of any page.

When the registry records a run COMPLETED it records its export as pending, in the same transaction
(:meth:`schedulers.registry.runs.RunRegistry.record_status`): durable, so a process that dies right
after is no loss. :func:`export_pending` then reads each pending run's final model back as canonical
weights — in a subprocess of the run's own interpreter, which has its framework
(:func:`core.trained.read_trained`) — and writes ONNX from the spec and those weights
(:mod:`core.onnx_export`, no framework) to ``<run dir>/model.onnx``. The command line calls it
after reconciling (``run --wait``, ``status``); the portal's :class:`ExportWorker` thread calls it
when a page wakes it, so no page render waits for a framework. The outcome is a line in the run's
history; a failure is recorded there as a warning and never fails the run or the caller.

A run's recorded interpreter is run only for the run's own user, or when it is one of the configured
environments' (:func:`checked_python`): an administrator acting for another user (``--user``), or a
shared portal's account, never runs an interpreter just because a registry names it.

``model/model.onnx``, where present, is the framework's own export written by ``train.py``
(torch's exporter; Keras and paddle only with optional packages); ``model.onnx`` beside it is
FlowTrain's, the same for every framework.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.errors import FlowTrainError
from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run, StateChange

if TYPE_CHECKING:
    import numpy as np

    from core.trained import Trained

EXPORT_TIMEOUT_S = 600.0


class UntrustedInterpreter(FlowTrainError):
    """Another user's run names an interpreter that no configured environment has."""

    exit_code = 2


def checked_python(run: Run) -> str | None:
    """The interpreter to read ``run``'s model back with: its recorded one, when this process's OS
    user is the run's user or the interpreter is a configured environment's (the environments file
    is the administrator's); :class:`UntrustedInterpreter` otherwise. A registry row is data: a
    tampered one must not make an administrator run a program of another user's choosing."""
    from settings import load_settings
    from settings.access import os_user

    if run.environment is None or run.user == os_user():
        return run.environment
    allowed = {env.python for env in load_settings().environments}
    if run.environment in allowed:
        return run.environment
    raise UntrustedInterpreter(
        f"run {run.id} of {run.user} records the interpreter {run.environment!r}, which is not one of the "
        f"configured environments' ({', '.join(sorted(allowed)) or 'none'}); it is not run as {os_user()}. "
        f"Export the run as {run.user}, or give its weights with --weights")


class RunBook(Protocol):
    """What the export needs of the run registry (:class:`schedulers.registry.runs.RunRegistry` is
    one): named here so that the registry and this module do not know each other."""

    def pending_exports(self, run_ids: Sequence[str] | None = None, user: str | None = None) -> list[Run]: ...

    def record_export(self, run_id: str, written: bool, detail: str) -> None: ...

    def history(self, run_id: str) -> list[StateChange]: ...


def export_run_onnx(run: Run, out: str | Path, *, weights: str | Path | None = None,
                    timeout: float = EXPORT_TIMEOUT_S) -> tuple[Path, str]:
    """Write ``run``'s ONNX model to ``out``; returns the path and where the weights came from.

    The weights: the ``.npz`` file ``weights`` (canonical) if given, else the run's final model.
    Raises :class:`~core.errors.FlowTrainError` (ExportError, TrainedModelError, SpecError).
    """
    from core.trained import read_trained

    if weights is not None:
        from core.weights import load_npz

        return _write(run, load_npz(weights), out), str(weights)
    trained = read_trained(run.run_dir, python=checked_python(run), timeout=timeout)
    return _write(run, trained.weights, out), trained.saved_model


def export_pending(registry: RunBook, run_ids: Sequence[str] | None = None, user: str | None = None) -> list[str]:
    """Write ``<run dir>/model.onnx`` for the completed runs whose export is pending (all, or those of
    ``run_ids``, or of ``user``); returns the history lines added.

    The final models are read back with one subprocess per interpreter and framework (for runs
    that completed while no one was looking, importing the framework once). Never raises for an
    export: whatever goes wrong (no final model, a framework that cannot read it, an op without an
    exporter, a full disk) is recorded as a warning in that run's history.
    """
    pending = registry.pending_exports(run_ids, user)
    if not pending:
        return []  # the common case: nothing is imported
    from core.trained import read_trained_many

    by_python: dict[str | None, dict[Path, Run]] = {}
    notes = []
    for run in pending:
        try:
            python = checked_python(run)
        except UntrustedInterpreter as exc:
            notes.append(_record(registry, run, exc))
            continue
        by_python.setdefault(python, {})[run.run_dir.resolve()] = run
    for python, group in by_python.items():
        done: set[str] = set()
        try:
            for folder, trained in read_trained_many(list(group), python=python, timeout=EXPORT_TIMEOUT_S):
                run = group[folder]
                notes.append(_record(registry, run, trained))
                done.add(run.id)
        except Exception as exc:  # noqa: BLE001  (recorded in each run's history below)
            notes += [_record(registry, run, exc) for run in group.values() if run.id not in done]
    return notes


class ExportWorker:
    """A daemon thread that runs :func:`export_pending` when it starts, whenever it is woken, and every
    ``interval_s`` besides (runs completed by another process): the portal's pages wake it and go on.

    ``export`` is what it runs (default :func:`schedulers.tracking.after_completion`: the pending
    exports, then the pending MLflow logging); an error of the registry itself (not
    of an export, which is recorded per run) is kept in :attr:`last_error` for a page to show.
    """

    def __init__(self, registry: RunBook, *, interval_s: float = 60.0,
                 export: Callable[[RunBook], object] | None = None) -> None:
        self.registry = registry
        self.interval_s = interval_s
        self.last_error: str | None = None
        self._export = export or _after_completion
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="flowtrain-onnx-export", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Ask for a pass soon; returns at once."""
        self._wake.set()

    def _loop(self) -> None:
        while True:  # a first pass at once: exports left pending by a process that died
            self._wake.clear()
            try:
                self._export(self.registry)
            except Exception as exc:  # noqa: BLE001  (kept for the page; the next pass tries again)
                self.last_error = f"{type(exc).__name__}: {exc}"
            else:
                self.last_error = None
            self._wake.wait(self.interval_s)


def _after_completion(registry: RunBook) -> object:
    from schedulers.tracking import after_completion

    return after_completion(registry)


def _write(run: Run, weights: Mapping[str, np.ndarray], out: str | Path) -> Path:
    from core.onnx_export import export_onnx, save_onnx

    return save_onnx(export_onnx(run.spec(), weights), out)


def _record(registry: RunBook, run: Run, trained: Trained | Exception) -> str:
    """Export one run from its trained weights (or the error reading them) and record the outcome."""
    written = False
    try:
        if isinstance(trained, Exception):
            raise trained
        from core.onnx_export import OPSET

        path = _write(run, trained.weights, run.run_dir / ONNX_NAME)
    except Exception as exc:  # noqa: BLE001  (recorded in the run's history: the run itself succeeded)
        detail = f"warning: {ONNX_NAME} not written: {type(exc).__name__}: {exc}"
    else:
        detail, written = f"{path.name} written (ONNX opset {OPSET}) from {trained.saved_model}", True
    registry.record_export(run.id, written, detail)
    return detail


def export_note(registry: RunBook, run_id: str) -> str | None:
    """The run's last history line about its ``model.onnx`` (written, or why not), if any."""
    notes = [h.detail for h in registry.history(run_id) if ONNX_NAME in h.detail]
    return notes[-1] if notes else None
