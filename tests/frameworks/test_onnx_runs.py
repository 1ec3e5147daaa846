"""Every completed run gets model.onnx, whatever its framework: a real run of each framework (local
executor, a few steps of a small CNN with BatchNorm on sklearn digits: the session fixture
``onnx_runs`` of tests/finished_runs.py, which tests/cli/test_predict.py shares) ends with ``model.onnx``
whose onnxruntime outputs match the framework's trained model (its saved final model, loaded by
the framework) within 1e-4, and whose BatchNorm statistics are the trained ones.
"""

from __future__ import annotations

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
from tests.cli.test_run_commands import flowtrain
from tests.finished_runs import FinishedRun

pytestmark = pytest.mark.frameworks

TOLERANCE = 1e-4


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_finished_run_has_model_onnx_that_matches_its_trained_model(framework: str, tmp_path: Path,
                                                                     onnx_runs: dict[str, FinishedRun]) -> None:
    finished = onnx_runs[framework]
    env, done = finished.env, finished.done
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "model.onnx written (ONNX opset 17)" in done.stdout  # `run --wait` says so

    registry = RunRegistry(home=finished.home)
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

    again = flowtrain(env, "export-onnx", run.id, "--out", str(tmp_path / "again.onnx"), timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"run {run.id} ({framework})" in again.stdout
    assert (tmp_path / "again.onnx").read_bytes() == (run.run_dir / "model.onnx").read_bytes()
