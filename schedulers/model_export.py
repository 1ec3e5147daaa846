"""Every completed run gets ``model.onnx``, whatever its framework.

When the registry records a run as COMPLETED (:meth:`schedulers.runs.RunRegistry.reconcile`, which
``run --wait``, ``status`` and the portal's pages call), :func:`export_completed_run` reads the
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

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schedulers.runs import Run, RunRegistry

ONNX_NAME = "model.onnx"
ONNX_MODEL_FILES = (ONNX_NAME, ONNX_NAME + ".data")  # the model, and its weights when they exceed 1 GiB
EXPORT_TIMEOUT_S = 600.0


def export_run_onnx(run: Run, out: str | Path, *, weights: str | Path | None = None,
                    timeout: float = EXPORT_TIMEOUT_S) -> tuple[Path, str]:
    """Write ``run``'s ONNX model to ``out``; returns the path and where the weights came from.

    The weights: the ``.npz`` file ``weights`` (canonical) if given, else the run's final model.
    Raises :class:`~core.errors.FlowTrainError` (ExportError, TrainedModelError, SpecError).
    """
    from core.onnx_export import export_onnx, save_onnx
    from core.trained import read_trained
    from core.validate import validate

    spec = run.spec()
    analysis = validate(spec)
    if weights is not None:
        from core.weights import load_npz

        arrays, source = load_npz(weights), str(weights)
    else:
        trained = read_trained(run.run_dir, python=run.environment, timeout=timeout)
        arrays, source = trained.weights, trained.saved_model
    return save_onnx(export_onnx(spec, arrays, analysis=analysis), out), source


def export_completed_run(registry: RunRegistry, run_id: str) -> str:
    """Write ``<run dir>/model.onnx`` for a run just recorded COMPLETED; the history line it added.

    Never raises for the export: whatever goes wrong (no final model, a framework that cannot read
    it, an op without an exporter, a full disk) is recorded as a warning in the run's history.
    """
    run = registry.get(run_id)
    try:
        from core.onnx_export import OPSET

        path, source = export_run_onnx(run, run.run_dir / ONNX_NAME)
    except Exception as exc:  # noqa: BLE001  (recorded in the run's history: the run itself succeeded)
        detail = f"warning: {ONNX_NAME} not written: {type(exc).__name__}: {exc}"
    else:
        detail = f"{path.name} written (ONNX opset {OPSET}) from {source}"
    registry.add_event(run_id, detail[:2000])
    return detail


def export_note(registry: RunRegistry, run_id: str) -> str | None:
    """The run's last history line about its ``model.onnx`` (written, or why not), if any."""
    notes = [h.detail for h in registry.history(run_id) if ONNX_NAME in h.detail]
    return notes[-1] if notes else None
