"""Every completed run gets model.onnx, whatever its framework: a real run of each framework (local
executor, a few steps of a small CNN with BatchNorm on sklearn digits) ends with ``model.onnx``
whose onnxruntime outputs match the framework's trained model (its saved final model, loaded by
the framework) within 1e-4, and whose BatchNorm statistics are the trained ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from core.mapping.base import FRAMEWORKS
from core.trained import read_trained
from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from settings.access import os_user

pytestmark = pytest.mark.frameworks

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4
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


def cli_env(tmp_path: Path) -> dict[str, str]:
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({"environments": [
        {"name": "venv", "python": sys.executable,
         "frameworks": {fw: {"version": "3"} for fw in FRAMEWORKS}}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWTRAIN_", "SLURM_"))}
    env.update(FLOWTRAIN_HOME=str(tmp_path / "home"), FLOWTRAIN_ENVIRONMENTS=str(envs))
    return env


def flowtrain(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_finished_run_has_model_onnx_that_matches_its_trained_model(framework: str, tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    done = flowtrain(env, "run", str(spec), "--framework", framework, "--scheduler", "local", "--wait",
                     "--max-steps", "6")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "model.onnx written (ONNX opset 17)" in done.stdout  # `run --wait` says so

    registry = RunRegistry(home=tmp_path / "home")
    [run] = registry.list_runs(os_user())
    assert (run.state, run.framework) == (RunState.COMPLETED, framework)
    history = registry.history(run.id)
    assert history[-1].state == "COMPLETED" and history[-1].detail.startswith("model.onnx written")
    assert {a.path: a.kind for a in registry.artifacts(run.id)}["model.onnx"] == "model"

    x = np.random.default_rng(7).standard_normal((5, 1, 8, 8)).astype(np.float32)
    trained = read_trained(run.run_dir, inputs=x)
    session = ort.InferenceSession(str(run.run_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(["output"], {"input": x})[0]
    diff = float(np.max(np.abs(got - trained.output)))
    assert diff <= TOLERANCE * max(1.0, float(np.max(np.abs(trained.output)))), f"{framework}: {diff:.3g}"
    print(f"{framework}: onnxruntime vs trained model max abs diff {diff:.3g}")

    stored = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(run.run_dir / "model.onnx")).graph.initializer}
    assert not np.allclose(stored["bn/running_var"], 1.0)  # trained statistics, not the initial ones
    np.testing.assert_array_equal(stored["bn/running_var"], trained.weights["bn/running_var"])

    again = flowtrain(env, "export-onnx", run.id, "--out", str(tmp_path / "again.onnx"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"run {run.id} ({framework})" in again.stdout
    assert (tmp_path / "again.onnx").read_bytes() == (run.run_dir / "model.onnx").read_bytes()
