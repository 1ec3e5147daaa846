"""A trained program's final model, read back in the canonical layout by its own framework.

``train.py`` saves its final model in its framework's format (``model/model.pt``, ``model.keras``,
``model.pdparams``; docs/generated-program.md). :func:`read_trained` loads that file into the
program's own ``model.py`` in a subprocess of the framework (the equivalence worker,
:mod:`core.equivalence_worker`, so this process never imports a framework) and returns the
weights through ``canonical_weights`` — torch's layout, keys ``"<node id>/<name>"`` — which is
what :mod:`core.onnx_export` writes ONNX from; given inputs it also returns the trained model's
outputs for them.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.equivalence import WORKER_TIMEOUT_S, run_worker
from core.equivalence_worker import SAVED_MODEL, error_path
from core.errors import FlowTrainError


class TrainedModelError(FlowTrainError):
    """The program folder has no final model, or its framework could not read it."""


@dataclass
class Trained:
    framework: str
    saved_model: str  # relative to the program folder
    weights: dict[str, np.ndarray]
    output: np.ndarray | None = None


def program_framework(folder: Path) -> str:
    """The framework a generated program folder was written for (its ``manifest.json``)."""
    manifest = folder / "manifest.json"
    try:
        framework = json.loads(manifest.read_text(encoding="utf-8"))["framework"]
    except FileNotFoundError:
        raise TrainedModelError(f"{folder} holds no generated program (no manifest.json)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TrainedModelError(f"{manifest} cannot be read: {type(exc).__name__}: {exc}") from None
    if framework not in SAVED_MODEL:
        raise TrainedModelError(f"{manifest} names an unknown framework {framework!r}")
    return str(framework)


def read_trained(folder: str | Path, *, python: str | None = None, inputs: np.ndarray | None = None,
                 timeout: float = WORKER_TIMEOUT_S) -> Trained:
    """The final model of the program in ``folder``: canonical weights (and outputs for ``inputs``).

    ``python``: the interpreter that has the program's framework (the run's environment; default
    this one). Raises :class:`TrainedModelError` naming what is missing or what went wrong.
    """
    folder = Path(folder).resolve()
    framework = program_framework(folder)
    saved = SAVED_MODEL[framework]
    if not (folder / saved).is_file():
        raise TrainedModelError(f"{folder} has no final model {saved} (the program writes it when training ends)")
    with tempfile.TemporaryDirectory(prefix="flowtrain-trained-") as tmp:
        root = Path(tmp)
        job: dict[str, str | bool] = {"dir": str(folder), "trained": True, "canonical": str(root / "canonical.npz")}
        if inputs is not None:
            np.savez(root / "inputs.npz", x=inputs)
            job.update(inputs=str(root / "inputs.npz"), out=str(root / "out.npz"))
        failure = run_worker(framework, [job], root, timeout, python)
        error = error_path(job)
        if error.exists():
            lines = error.read_text(encoding="utf-8").strip().splitlines()
            raise TrainedModelError(f"{framework} could not read {saved}: " + " | ".join(lines[-3:]))
        if failure is not None:
            raise TrainedModelError(failure)
        with np.load(root / "canonical.npz") as data:
            weights = {key: data[key] for key in data.files}
        output = None
        if inputs is not None:
            with np.load(root / "out.npz") as data:
                output = data["output"]
    return Trained(framework, saved, weights, output)
