"""Every completed run gets ``model.onnx``, whatever its framework.

When the registry records runs as COMPLETED (:meth:`schedulers.registry.runs.RunRegistry.reconcile`, which
``run --wait``, ``status`` and the portal's pages call), :func:`export_completed_runs` reads each
run's final model back as canonical weights — in a subprocess of the run's own interpreter, which
has its framework (:func:`core.trained.read_trained`) — and writes ONNX from the spec and those
weights (:mod:`core.onnx_export`, no framework) to ``<run dir>/model.onnx``. The outcome is a line
in the run's history; a failure is recorded there as a warning and never fails the run or the
caller.

``model/model.onnx``, where present, is the framework's own export written by ``train.py``
(torch's exporter; Keras and paddle only with optional packages); ``model.onnx`` beside it is
FlowTrain's, the same for every framework.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run, StateChange

if TYPE_CHECKING:
    import numpy as np

    from core.trained import Trained

EXPORT_TIMEOUT_S = 600.0


class RunBook(Protocol):
    """What the export needs of the run registry (:class:`schedulers.registry.runs.RunRegistry` is one):
    named here so this module does not import the registry that calls it."""

    def get(self, run_id: str, user: str | None = None) -> Run: ...

    def add_event(self, run_id: str, detail: str) -> None: ...

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
    trained = read_trained(run.run_dir, python=run.environment, timeout=timeout)
    return _write(run, trained.weights, out), trained.saved_model


def export_completed_runs(registry: RunBook, run_ids: Sequence[str]) -> list[str]:
    """Write ``<run dir>/model.onnx`` for runs just recorded COMPLETED; the history lines added.

    The final models are read back with one subprocess per interpreter and framework (for runs
    that completed while no one was looking, importing the framework once). Never raises for an
    export: whatever goes wrong (no final model, a framework that cannot read it, an op without an
    exporter, a full disk) is recorded as a warning in that run's history.
    """
    if not run_ids:
        return []  # the common case: nothing is imported
    from core.trained import read_trained_many

    by_python: dict[str | None, dict[Path, Run]] = {}
    for run in (registry.get(run_id) for run_id in run_ids):
        by_python.setdefault(run.environment, {})[run.run_dir.resolve()] = run
    notes = []
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


def _write(run: Run, weights: Mapping[str, np.ndarray], out: str | Path) -> Path:
    from core.onnx_export import export_onnx, save_onnx

    return save_onnx(export_onnx(run.spec(), weights), out)


def _record(registry: RunBook, run: Run, trained: Trained | Exception) -> str:
    """Export one run from its trained weights (or the error reading them) and add the history line."""
    try:
        if isinstance(trained, Exception):
            raise trained
        from core.onnx_export import OPSET

        path = _write(run, trained.weights, run.run_dir / ONNX_NAME)
    except Exception as exc:  # noqa: BLE001  (recorded in the run's history: the run itself succeeded)
        detail = f"warning: {ONNX_NAME} not written: {type(exc).__name__}: {exc}"
    else:
        detail = f"{path.name} written (ONNX opset {OPSET}) from {trained.saved_model}"
    registry.add_event(run.id, detail[:2000])
    return detail


def export_note(registry: RunBook, run_id: str) -> str | None:
    """The run's last history line about its ``model.onnx`` (written, or why not), if any."""
    notes = [h.detail for h in registry.history(run_id) if ONNX_NAME in h.detail]
    return notes[-1] if notes else None
