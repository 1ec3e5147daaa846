"""Imported published CNNs compute what onnxruntime computes, in every framework, and a generated
program starts from ``training.init_weights``.

The models are the ``light_*`` CNNs the ``onnx`` package ships (tests/onnx_models.py: AlexNet,
DenseNet-121, GoogLeNet, Inception v2, ResNet-50, ShuffleNet, SqueezeNet, ZFNet) with seeded
random weights in place of their placeholders, at their own 224×224 input size and batch 1 (their Gemm heads are sized for it).
VGG-19 imports and validates in tests/core/test_onnx_import.py but is not run here: its ops (Conv 3×3
pad 1, Relu, MaxPool 2×2 stride 2, Reshape, Gemm, Dropout, Softmax) take the same importers and
converters as AlexNet's and ZFNet's (ZFNet's MaxPool is the same 2×2 stride 2), and its 20 GMACs and
548 MB of weights made it the slowest case by far in every framework.
Each framework runs all of them in one worker subprocess (:func:`core.equivalence.run_worker`, as the
equivalence check does), loading the imported canonical weights; each output must be within 1e-4 of
onnxruntime's logits, relative to their scale as in :mod:`core.equivalence`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from core.codegen import generate
from core.equivalence import run_worker
from core.load import load_spec
from core.mapping.base import FRAMEWORKS
from core.onnx_import import import_onnx
from core.spec import PipelineSpec
from core.trained import read_trained
from core.validate import validate
from core.weights import random_canonical
from tests.core.test_onnx_import import IMPORTED, run_ort
from tests.onnx_models import published, with_output, with_random_weights

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4
WORKER_TIMEOUT_S = 1500.0  # all eight networks in one framework's subprocess
# Every published model but VGG-19, whose every op and attribute another one here has (see above).
IN_FRAMEWORKS = tuple(name for name in IMPORTED if name != "vgg19")


@pytest.fixture(scope="module")
def imported_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """For each model: onnxruntime's logits, and each framework's output or its error."""
    root = tmp_path_factory.mktemp("onnx-import")
    jobs: dict[str, list[dict[str, object]]] = {fw: [] for fw in FRAMEWORKS}
    results: dict[str, dict[str, object]] = {}
    for name in IN_FRAMEWORKS:
        model = with_random_weights(onnx.load(published(name)))
        imported = import_onnx(model, name=name)
        x = np.random.default_rng(1).standard_normal((1, *imported.spec.data.input_shape)).astype(np.float32)
        results[name] = {"onnxruntime": run_ort(with_output(model, imported.output_tensor), x)}
        case = root / name
        case.mkdir()
        np.savez(case / "weights.npz", **imported.weights)
        np.savez(case / "inputs.npz", x=x)
        for fw in FRAMEWORKS:
            generate(imported.spec, fw).write(case / fw)
            jobs[fw].append({"name": name, "dir": str(case / fw), "weights": str(case / "weights.npz"),
                             "inputs": str(case / "inputs.npz"), "out": str(case / f"out-{fw}.npz"),
                             "train_update": False})
    for fw, fw_jobs in jobs.items():
        failure = run_worker(fw, fw_jobs, root, WORKER_TIMEOUT_S)
        for job in fw_jobs:
            out, error = Path(str(job["out"])), Path(f"{job['out']}.error.txt")
            results[str(job["name"])][fw] = (np.load(out)["output"] if out.exists() else
                                             error.read_text() if error.exists() else failure)
    return results


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", IN_FRAMEWORKS)
def test_imported_model_matches_onnxruntime(name: str, framework: str,
                                            imported_runs: dict[str, dict[str, object]]) -> None:
    reference = np.asarray(imported_runs[name]["onnxruntime"])
    got = imported_runs[name][framework]
    assert isinstance(got, np.ndarray), f"{framework} did not run {name}: {got}"
    assert got.size == reference.size == 1000
    diff = float(np.max(np.abs(got.reshape(-1).astype(np.float64) - reference.reshape(-1))))
    assert diff <= TOLERANCE * max(1.0, float(np.max(np.abs(reference)))), f"{name} in {framework}: {diff}"


def test_a_fresh_run_starts_from_init_weights_in_every_framework(tmp_path: Path) -> None:
    """digits_cnn with init_weights and a learning rate of 1e-9: after one step every framework's saved
    model holds the given weights (not its own seeded initialisation)."""
    doc = load_spec(ROOT / "examples" / "digits_cnn.json").model_dump(mode="json")
    doc["training"].update(epochs=1, optimizer={"name": "sgd", "lr": 1e-9, "momentum": 0.0},
                           schedule={"name": "constant"}, init_weights=str(tmp_path / "init.npz"))
    spec = PipelineSpec.model_validate(doc)
    given = random_canonical(validate(spec), seed=7)
    np.savez(tmp_path / "init.npz", **given)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}
    for fw in FRAMEWORKS:
        folder = tmp_path / fw
        generate(spec, fw).write(folder)
        proc = subprocess.run([sys.executable, "train.py", "--max-steps", "1"], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        trained = read_trained(folder).weights
        assert trained.keys() == given.keys()
        for key, value in given.items():
            np.testing.assert_allclose(trained[key], value, atol=1e-6, err_msg=f"{fw}: {key}")

