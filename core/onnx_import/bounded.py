"""An ONNX import in a subprocess with a memory limit and a timeout: how the portal imports an upload.

The folding budget (:class:`~core.onnx_import.FoldBudget`) bounds what the import computes by the
rules it knows; this bounds everything else too, whatever a crafted file finds. The subprocess

- starts from the jobs' allow-listed environment (:mod:`core.allowed_env`), one BLAS thread;
- runs in a private temporary folder that holds the upload and nothing else (its working folder: no
  relative path can reach the portal's files, even past the external-data checks);
- limits its own address space (``RLIMIT_AS``) to ``memory_bytes`` before it reads the model, and is
  killed after ``timeout`` seconds.

It writes its result as data — the spec as JSON, the weights as ``.npz`` (read back without pickle),
the problems as their fields — never as a pickle.

    python -m core.onnx_import.bounded FOLDER
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from core.allowed_env import allowed_environment
from core.errors import FlowTrainError, Problem, SpecError

if TYPE_CHECKING:
    from core.onnx_import import ImportResult

ROOT = Path(__file__).resolve().parents[2]
MEMORY_BYTES = 2 * 2**30  # the interpreter, numpy and onnx need under 512 MiB of it; the rest is the model's
TIMEOUT_S = 120.0


def import_bounded(raw: bytes | BinaryIO, name: str, budget: dict[str, float] | None = None,
                   memory_bytes: int = MEMORY_BYTES, timeout: float = TIMEOUT_S,
                   keep_weights: Callable[[BinaryIO], object] | None = None) -> ImportResult:
    """:func:`core.onnx_import.import_onnx` of the bytes ``raw`` (or of an open model file, copied in pieces,
    never whole in this process's memory) in a bounded subprocess; returns its
    :class:`~core.onnx_import.ImportResult`, raises :class:`SpecError` with its problems or
    :class:`FlowTrainError` saying which bound stopped it. ``budget``: :class:`FoldBudget`'s keywords.
    ``keep_weights``: given the weights' ``.npz`` as an open file (opened with ``O_NOFOLLOW``), it copies them
    where they go, and the result's ``weights`` are left empty: a large model's weights never pass through
    this process's memory."""
    from core.load import spec_from_json
    from core.onnx_import import ImportResult  # noqa: F811  (the class itself, at run time)

    with tempfile.TemporaryDirectory(prefix="flowtrain-onnx-import-") as tmp:
        folder = Path(tmp)
        if isinstance(raw, bytes):
            (folder / "model.onnx").write_bytes(raw)
        else:  # the subprocess's folder holds the model and nothing else
            with (folder / "model.onnx").open("wb") as out:
                shutil.copyfileobj(raw, out, 2**20)
        (folder / "job.json").write_text(json.dumps({"name": name, "budget": budget or {}, "memory": memory_bytes}))
        env = {**allowed_environment(), "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        try:
            proc = subprocess.run([sys.executable, "-m", "core.onnx_import.bounded", str(folder)], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise FlowTrainError(f"the import did not finish within {timeout:g} s and was stopped; import the model "
                                 "with `python -m flowtrain import-onnx MODEL.onnx` instead") from None
        result = folder / "result.json"
        if not result.is_file():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])
            raise FlowTrainError(f"the import stopped (exit {proc.returncode}) within its limit of "
                                 f"{memory_bytes / 2**30:g} GiB of memory: {tail[-300:] or 'no message'}")
        doc = json.loads(result.read_text(encoding="utf-8"))
        if doc["kind"] == "problems":
            raise SpecError([Problem(**p) for p in doc["problems"]])
        if doc["kind"] == "error":
            raise FlowTrainError(doc["message"])
        weights: dict[str, np.ndarray] = {}
        if keep_weights is not None:
            with os.fdopen(os.open(folder / "weights.npz", os.O_RDONLY | os.O_NOFOLLOW), "rb") as saved_file:
                keep_weights(saved_file)
        else:
            with np.load(folder / "weights.npz", allow_pickle=False) as saved:
                weights = {key: saved[key] for key in saved.files}
        return ImportResult(spec_from_json(doc["spec"], source=name), weights, doc["output_tensor"], doc["notes"])


def _work(folder: Path) -> dict[str, object]:
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    resource.setrlimit(resource.RLIMIT_AS, (job["memory"], job["memory"]))
    from core.onnx_import import FoldBudget, import_onnx

    try:
        result = import_onnx((folder / "model.onnx").read_bytes(), name=job["name"], budget=FoldBudget(**job["budget"]))
    except SpecError as err:
        return {"kind": "problems", "problems": [dataclasses.asdict(p) for p in err.problems]}
    except FlowTrainError as err:
        return {"kind": "error", "message": str(err)}
    except MemoryError:
        return {"kind": "error", "message": f"the import needed more than its {job['memory'] / 2**30:g} GiB of memory"}
    np.savez(folder / "weights.npz", **result.weights)
    return {"kind": "ok", "spec": result.spec.to_json(), "output_tensor": result.output_tensor, "notes": result.notes}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    (out / "result.json").write_text(json.dumps(_work(out)), encoding="utf-8")
