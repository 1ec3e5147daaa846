"""Runs generated ``model.py`` files of ONE framework in its own process, for two jobs: their outputs
for given weights (the equivalence check, :mod:`core.equivalence`) and a trained program's final
model read back as canonical weights (:mod:`core.trained`).

    python -m core.model_worker --dir D --weights W.npz --inputs X.npz --out Y.npz [--train-update]
    python -m core.model_worker --jobs JOBS.json

Each job loads ``D/model.py`` (framework read from ``D/manifest.json``), builds the model, loads the
canonical weights, runs the inputs in eval mode and writes ``output`` to Y.npz. With
``train_update`` it also runs one training-mode forward pass on a fresh copy and writes the
canonical weights afterwards as ``after/<key>`` (BatchNorm running statistics move; nothing
else should). With ``--jobs`` a failing job is recorded in ``<out>.error.txt`` and the others
still run, so one broken graph does not hide the rest.

A job with ``"trained": true`` loads the program's final model instead (:data:`SAVED_MODEL`, what
``train.py`` saved at the end of a run in D) and, with ``"canonical": C.npz``, writes its weights in
the canonical layout there; ``inputs``/``out`` are then optional (the trained model's outputs).
With ``"generate": {…}`` (a :class:`core.sampling.Request`) it generates tokens from the trained
language model instead and writes their ``ids`` to ``out`` (``flowtrain sample --framework``): the
model is loaded once, however many tokens are asked for.

This module imports only numpy, the standard library and — inside the job — one framework and
the generated model.py; never another part of FlowTrain (but :mod:`core.sampling`, numpy only, for
a generate job), so it measures the generated code alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pickle
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np


def load_model_module(folder: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, folder / "model.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {folder / 'model.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The final model each framework's train.py saves (docs/generated-program.md, "What it writes").
SAVED_MODEL = {"torch": "model/model.pt", "keras": "model/model.keras", "paddle": "model/model.pdparams"}


# What a paddle.save'd state dict may name: numpy's array reconstruction, nothing else.
PDPARAMS_GLOBALS = {("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
                    ("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "OrderedDict")}


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds numpy arrays and dicts only (paddle.load would run any pickle)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in PDPARAMS_GLOBALS:
            raise pickle.UnpicklingError(f"refused to load {module}.{name}: a paddle state dict holds arrays only")
        return super().find_class(module, name)


def read_pdparams(path: Path) -> dict[str, np.ndarray]:
    """A ``paddle.save``'d state dict as arrays, without running code a crafted file may carry."""
    with open(path, "rb") as f:
        state = _ArraysOnly(f).load()
    if not isinstance(state, dict):
        raise ValueError(f"{path} is not a paddle state dict")
    return {k: v for k, v in state.items() if isinstance(v, np.ndarray)}  # paddle adds a name map


def load_saved_model(framework: str, model: Any, path: Path) -> None:
    """The weights ``train.py`` saved at ``path`` into ``model`` (built by the same ``model.py``)."""
    if framework == "torch":
        import torch

        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    elif framework == "keras":
        model.load_weights(str(path))
    elif framework == "paddle":
        missing, unexpected = model.set_state_dict(read_pdparams(path))
        if missing or unexpected:
            raise ValueError(f"{path} does not fit this model: missing {missing}, unexpected {unexpected}")
    else:
        raise ValueError(f"unknown framework {framework!r}")


def train_forward(framework: str, module: ModuleType, model: Any, x: np.ndarray) -> None:
    """One forward pass in training mode without an optimizer step (updates BatchNorm statistics)."""
    if framework == "torch":
        import torch

        model.train()
        with torch.no_grad():
            model(torch.from_numpy(x))
    elif framework == "keras":
        to_layout = getattr(module, "to_keras_layout", None)
        model(to_layout(x) if to_layout is not None else x, training=True)
    elif framework == "paddle":
        import paddle

        model.train()
        with paddle.no_grad():
            model(paddle.to_tensor(x))
    else:
        raise ValueError(f"unknown framework {framework!r}")


def run_job(job: dict[str, Any], index: int) -> None:
    folder = Path(job["dir"])
    framework = json.loads((folder / "manifest.json").read_text())["framework"]
    module = load_model_module(folder, f"flowtrain_equivalence_model_{index}")
    if framework == "torch":
        import torch

        torch.manual_seed(0)
    model = module.build_model()
    if job.get("trained"):
        load_saved_model(framework, model, folder / SAVED_MODEL[framework])
    else:
        with np.load(job["weights"]) as w:
            weights = {k: w[k] for k in w.files}
        module.load_canonical_weights(model, weights)
    if job.get("generate"):
        from core.sampling import Request, generate

        ids = generate(lambda x: module.forward_numpy(model, x), Request(**job["generate"]))
        _save(Path(job["out"]), {"ids": np.asarray(ids, np.int64)})
        return
    if job.get("canonical"):
        _save(Path(job["canonical"]), {key: np.asarray(value, dtype=np.float32)
                                       for key, value in module.canonical_weights(model).items()})
    if not job.get("inputs"):
        return
    with np.load(job["inputs"]) as i:
        x = i["x"]
    batch = int(job.get("batch") or len(x) or 1)  # predict's --batch: bounds the framework's memory
    outputs = [np.asarray(module.forward_numpy(model, x[i:i + batch]), dtype=np.float32)
               for i in range(0, len(x), batch)]
    results = {"output": np.concatenate(outputs) if outputs else np.zeros((0,), np.float32)}
    if job.get("train_update"):
        fresh = module.build_model()
        module.load_canonical_weights(fresh, weights)
        train_forward(framework, module, fresh, x)
        for key, value in module.canonical_weights(fresh).items():
            results[f"after/{key}"] = np.asarray(value, dtype=np.float32)
    _save(Path(job["out"]), results)


def _save(out: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(out)


def error_path(job: dict[str, Any]) -> Path:
    """Where a failed job's traceback goes: beside its output (or its canonical weights)."""
    return Path((job.get("out") or job["canonical"]) + ".error.txt")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", help="JSON list of {dir, weights, inputs, out, train_update}")
    parser.add_argument("--dir")
    parser.add_argument("--weights")
    parser.add_argument("--inputs")
    parser.add_argument("--out")
    parser.add_argument("--train-update", action="store_true")
    args = parser.parse_args(argv)
    if args.jobs:
        jobs = json.loads(Path(args.jobs).read_text())
        for i, job in enumerate(jobs):
            try:
                run_job(job, i)
            except Exception:  # noqa: BLE001  (recorded for the parent, which reports it per graph)
                error_path(job).write_text(traceback.format_exc())
        return 0
    if not (args.dir and args.weights and args.inputs and args.out):
        parser.error("give --jobs, or all of --dir, --weights, --inputs and --out")
    run_job({"dir": args.dir, "weights": args.weights, "inputs": args.inputs, "out": args.out,
             "train_update": args.train_update}, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
