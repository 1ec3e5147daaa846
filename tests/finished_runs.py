"""Session fixture: one finished local run per framework of a small BatchNorm CNN on the digits, each
with its ``model.onnx``. Two modules check those runs: tests/frameworks/test_onnx_runs.py (model.onnx
matches the framework's trained model, BatchNorm statistics included) and tests/cli/test_predict.py
(``predict`` through each framework's own saved model agrees with model.onnx and reproduces the run's
validation accuracy). Training them once per session, not once per module, saves two framework runs
(each a fresh interpreter importing its framework); tests/conftest.py puts both modules in one
pytest-xdist group so the fixture runs once.

Re-exported as a fixture by tests/conftest.py (``from tests.finished_runs import onnx_runs``).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.mapping.base import FRAMEWORKS

NODES = [("input", "Input", {}), ("conv", "Conv2d", {"out_channels": 6, "kernel_size": 3, "padding": 1}),
         ("bn", "BatchNorm2d", {}), ("relu", "ReLU", {}), ("pool", "MaxPool2d", {"kernel_size": 2}),
         ("flatten", "Flatten", {}), ("fc", "Linear", {"out_features": 10}), ("output", "Output", {})]
SPEC = {
    "schema_version": 1, "name": "digits_bn",
    "data": {"source": "sklearn:digits", "batch_size": 32, "validation_split": 0.2, "num_workers": 0,
             "preprocessing": [{"op": "scale", "max_value": 16.0}]},
    "model": {"nodes": [{"id": i, "op": op, "params": p} for i, op, p in NODES],
              "edges": [{"source": a[0], "target": b[0]} for a, b in zip(NODES, NODES[1:])]},
    "training": {"epochs": 1, "loss": "cross_entropy", "optimizer": {"name": "adam", "lr": 0.01}, "seed": 0,
                 "log_every_steps": 5, "resources": {"cpus_per_task": 1}},
}
STEPS = 6


@dataclass(frozen=True)
class FinishedRun:
    """``flowtrain run SPEC --framework F --scheduler local --wait`` in its own home; ``tmp`` is its data
    root (files handed to ``predict`` go there). The tests assert on ``done``: a failed run fails the
    tests of its framework only."""

    framework: str
    env: dict[str, str]
    home: Path
    tmp: Path
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="session")
def onnx_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FinishedRun]:
    from tests.cli.test_run_commands import cli_env, flowtrain  # a test module: not imported with the conftest

    runs = {}
    for framework in FRAMEWORKS:
        tmp = tmp_path_factory.mktemp(f"onnx-run-{framework}")
        env = cli_env(tmp / "home", tmp)
        spec = tmp / "spec.json"
        spec.write_text(json.dumps(SPEC))
        done = flowtrain(env, "run", str(spec), "--framework", framework, "--scheduler", "local", "--wait",
                         "--max-steps", str(STEPS), timeout=600)
        runs[framework] = FinishedRun(framework, env, tmp / "home", tmp, done)
    return runs
