"""Reading trained programs' final models back (core/trained.py) without a framework: what is
refused before any subprocess starts, and how folders are batched into worker subprocesses (the
worker itself is replaced here; with real frameworks: tests/frameworks/test_onnx_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import core.trained
from core.trained import Trained, TrainedModelError, read_trained, read_trained_many


def program(root: Path, name: str, framework: str | None = "torch", saved: bool = True) -> Path:
    folder = root / name
    folder.mkdir()
    if framework is not None:
        (folder / "manifest.json").write_text(json.dumps({"framework": framework}))
    if saved and framework is not None:
        (folder / "model").mkdir()
        (folder / "model" / {"torch": "model.pt", "keras": "model.keras", "paddle": "model.pdparams"}[framework]
         ).write_bytes(b"weights")
    return folder


def test_what_cannot_be_read_is_refused_before_any_subprocess(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core.trained, "run_worker", lambda *a, **k: pytest.fail("no worker should start"))
    with pytest.raises(TrainedModelError, match="holds no generated program"):
        read_trained(program(tmp_path, "empty", framework=None))
    with pytest.raises(TrainedModelError, match=r"has no final model model/model.keras"):
        read_trained(program(tmp_path, "unfinished", "keras", saved=False))
    (program(tmp_path, "odd", None) / "manifest.json").write_text('{"framework": "jax"}')
    with pytest.raises(TrainedModelError, match="unknown framework 'jax'"):
        read_trained(tmp_path / "odd")


def test_folders_are_read_in_one_worker_per_framework_and_chunk(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int, str | None]] = []

    def worker(framework: str, jobs: list[dict[str, Any]], folder: Path, timeout: float,
               python: str | None = None) -> str | None:
        calls.append((framework, len(jobs), python))
        for job in jobs:
            if job["dir"].endswith("broken"):
                Path(job["canonical"] + ".error.txt").write_text("Traceback\nRuntimeError: bad file")
            else:
                np.savez(job["canonical"], **{"fc/weight": np.full(2, len(calls), np.float32)})
        return None

    monkeypatch.setattr(core.trained, "run_worker", worker)
    folders = [program(tmp_path, f"t{i}") for i in range(3)] + [program(tmp_path, "p0", "paddle"),
                                                                 program(tmp_path, "broken"),
                                                                 program(tmp_path, "none", None)]
    results = dict(read_trained_many(folders, python="/envs/a/python", chunk=2))
    assert calls == [("torch", 2, "/envs/a/python"), ("torch", 2, "/envs/a/python"), ("paddle", 1, "/envs/a/python")]
    assert set(results) == {f.resolve() for f in folders}
    ok = {f.name: r for f, r in results.items() if isinstance(r, Trained)}
    assert {name: int(r.weights["fc/weight"][0]) for name, r in ok.items()} == {"t0": 1, "t1": 1, "t2": 2, "p0": 3}
    assert ok["p0"].saved_model == "model/model.pdparams" and ok["t0"].framework == "torch"
    errors = {f.name: str(r) for f, r in results.items() if isinstance(r, TrainedModelError)}
    assert errors["broken"] == "torch could not read model/model.pt: Traceback | RuntimeError: bad file"
    assert "no manifest.json" in errors["none"]
