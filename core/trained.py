"""A trained program's final model, read back in the canonical layout by its own framework.

``train.py`` saves its final model in its framework's format (``model/model.pt``, ``model.keras``,
``model.pdparams``; docs/generated-program.md). :func:`read_trained` loads that file into the
program's own ``model.py`` in a subprocess of the framework (the model worker,
:mod:`core.model_worker`, so this process never imports a framework) and returns the
weights through ``canonical_weights`` — torch's layout, keys ``"<node id>/<name>"`` — which is
what :mod:`core.onnx_export` writes ONNX from; given inputs it also returns the trained model's
outputs for them. :func:`generate_trained` generates tokens from a trained language model the same way.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.equivalence import WORKER_TIMEOUT_S, run_worker
from core.errors import FlowTrainError
from core.model_worker import SAVED_MODEL, error_path
from core.sampling import Request

WORKER_CHUNK = 8  # program folders per worker subprocess: bounds the weights on disk and in memory at once


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
                 timeout: float = WORKER_TIMEOUT_S, batch: int | None = None) -> Trained:
    """The final model of the program in ``folder``: canonical weights (and outputs for ``inputs``).

    ``python``: the interpreter that has the program's framework (the run's environment; default
    this one). ``batch``: the inputs go through the model this many at a time (default all at once).
    Raises :class:`TrainedModelError` naming what is missing or what went wrong.
    """
    [(_, result)] = list(read_trained_many([folder], python=python, inputs=inputs, timeout=timeout, batch=batch))
    if isinstance(result, TrainedModelError):
        raise result
    return result


def read_trained_many(folders: Sequence[str | Path], *, python: str | None = None,
                      inputs: np.ndarray | None = None, timeout: float = WORKER_TIMEOUT_S,
                      chunk: int = WORKER_CHUNK, batch: int | None = None,
                      ) -> Iterator[tuple[Path, Trained | TrainedModelError]]:
    """:func:`read_trained` for several program folders, one subprocess per framework and ``chunk``
    of folders (importing the framework is the slow part); yields each folder with its result or
    its error as soon as its chunk is done, so that only one chunk's weights are held at a time."""
    groups: dict[str, list[Path]] = {}
    for folder in (Path(f).resolve() for f in folders):
        try:
            framework = program_framework(folder)
            if not (folder / SAVED_MODEL[framework]).is_file():
                raise TrainedModelError(f"{folder} has no final model {SAVED_MODEL[framework]} (the program "
                                        "writes it when training ends)")
        except TrainedModelError as exc:
            yield folder, exc
            continue
        groups.setdefault(framework, []).append(folder)
    for framework, group in groups.items():
        for i in range(0, len(group), chunk):
            yield from _read_chunk(framework, group[i:i + chunk], python, inputs, timeout, batch)


def _read_chunk(framework: str, folders: list[Path], python: str | None, inputs: np.ndarray | None,
                timeout: float, batch: int | None) -> Iterator[tuple[Path, Trained | TrainedModelError]]:
    saved = SAVED_MODEL[framework]
    with tempfile.TemporaryDirectory(prefix="flowtrain-trained-") as tmp:
        root = Path(tmp)
        if inputs is not None:
            np.savez(root / "inputs.npz", x=inputs)
        jobs: list[dict[str, str | bool | int]] = []
        for i, folder in enumerate(folders):
            job: dict[str, str | bool | int] = {"dir": str(folder), "trained": True,
                                                "canonical": str(root / f"w{i}.npz")}
            if inputs is not None:
                job.update(inputs=str(root / "inputs.npz"), out=str(root / f"out{i}.npz"), batch=batch or 0)
            jobs.append(job)
        failure = run_worker(framework, jobs, root, timeout, python)
        for folder, job in zip(folders, jobs):
            yield folder, _collect(framework, saved, job, failure)


def _collect(framework: str, saved: str, job: dict[str, str | bool | int], failure: str | None) -> Trained | TrainedModelError:
    error = error_path(job)
    if error.exists():
        lines = error.read_text(encoding="utf-8").strip().splitlines()
        return TrainedModelError(f"{framework} could not read {saved}: " + " | ".join(lines[-3:]))
    if not Path(str(job["canonical"])).exists():
        return TrainedModelError(failure or f"the {framework} worker wrote no weights")
    with np.load(str(job["canonical"])) as data:
        weights = {key: data[key] for key in data.files}
    output = None
    if "out" in job:
        with np.load(str(job["out"])) as data:
            output = data["output"]
    return Trained(framework, saved, weights, output)


def generate_trained(folder: str | Path, request: Request, *, python: str | None = None,
                     timeout: float = WORKER_TIMEOUT_S) -> list[int]:
    """The ids the final language model of the program in ``folder`` generates for ``request``
    (:mod:`core.sampling`'s loop, run by the model worker in the framework's subprocess).
    Raises :class:`TrainedModelError` naming what is missing or what went wrong."""
    folder = Path(folder).resolve()
    framework = program_framework(folder)
    saved = SAVED_MODEL[framework]
    if not (folder / saved).is_file():
        raise TrainedModelError(f"{folder} has no final model {saved} (the program writes it when training ends)")
    with tempfile.TemporaryDirectory(prefix="flowtrain-generate-") as tmp:
        job: dict[str, object] = {"dir": str(folder), "trained": True, "generate": request.to_json(),
                                  "out": str(Path(tmp) / "ids.npz")}
        failure = run_worker(framework, [job], Path(tmp), timeout, python)
        error = error_path(job)
        if error.exists():
            lines = error.read_text(encoding="utf-8").strip().splitlines()
            raise TrainedModelError(f"{framework} could not generate with {saved}: " + " | ".join(lines[-3:]))
        if not Path(str(job["out"])).exists():
            raise TrainedModelError(failure or f"the {framework} worker wrote no tokens")
        with np.load(str(job["out"])) as data:
            return [int(i) for i in data["ids"]]
