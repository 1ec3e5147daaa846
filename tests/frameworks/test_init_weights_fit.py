"""Starting weights that no longer fit the graph (a covered node edited after an ONNX import) end a
generated program at once with one line naming every misfit node, in every framework, never a loader's
traceback; a file without some node's weights (dropped in the editor) starts those nodes from their own
initialisers and trains. The model is a small iris MLP (input → fc1 → ReLU → fc2): importing the
framework is the slow part, so each framework runs once, and torch's program runs a second time for
the partial file (the program reads the file at its pinned path when it runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.codegen import generate
from core.mapping.base import FRAMEWORKS
from core.spec import PipelineSpec
from core.trained import read_trained
from core.validate import validate
from core.weights import random_canonical

pytestmark = pytest.mark.frameworks

ENV = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}


def _spec(weights: Path, fc1_features: int = 8) -> PipelineSpec:
    nodes = [{"id": "input", "op": "Input", "params": {}},
             {"id": "fc1", "op": "Linear", "params": {"out_features": fc1_features}},
             {"id": "relu", "op": "ReLU", "params": {}},
             {"id": "fc2", "op": "Linear", "params": {"out_features": 3}},
             {"id": "output", "op": "Output", "params": {}}]
    chain = [n["id"] for n in nodes]
    return PipelineSpec.model_validate({
        "name": "t", "data": {"source": "sklearn:iris", "preprocessing": [{"op": "standardize"}]},
        "model": {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(chain, chain[1:])]},
        "training": {"loss": "cross_entropy", "seed": 0, "epochs": 1, "init_weights": str(weights),
                     "optimizer": {"name": "sgd", "lr": 1e-9, "momentum": 0.0}, "schedule": {"name": "constant"}}})


def _run(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "train.py", "--max-steps", "1"], cwd=folder, env=ENV,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_weights_of_an_edited_node_are_named_in_one_line_not_a_traceback(tmp_path: Path, framework: str) -> None:
    weights = tmp_path / "init.npz"
    spec = _spec(weights)  # fc1 has 8 features
    np.savez(weights, **random_canonical(validate(_spec(weights, fc1_features=16)), seed=3))  # saved with 16
    folder = tmp_path / framework
    generate(spec, framework).write(folder)
    proc = _run(folder)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert "do not fit 2 node(s)" in line and "fc1: fc1/weight (16, 4) != (8, 4)" in line
    assert "fc2: fc2/weight (3, 16) != (3, 8)" in line
    if framework != "torch":
        return
    # the same program, the file now without fc2's weights (dropped in the editor): it trains
    given = random_canonical(validate(spec), seed=3)
    kept = {k: v for k, v in given.items() if not k.startswith("fc2/")}
    np.savez(weights, **kept)
    proc = _run(folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    trained = read_trained(folder).weights
    for key, value in kept.items():
        np.testing.assert_allclose(trained[key], value, atol=1e-6, err_msg=key)
    assert not np.allclose(trained["fc2/weight"], given["fc2/weight"], atol=1e-3)  # its own initialiser
