"""``python -m flowtrain export-onnx`` from a spec file, run as a user runs it (no framework needed).
From a run's id: tests/frameworks/test_onnx_runs.py (it needs a trained run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from core.validate import validate
from core.weights import random_canonical
from tests.op_cases import flatten_linear_spec

ROOT = Path(__file__).resolve().parents[2]


def flowtrain(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))  # run from tmp_path: relative --out
    proc = subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def initialisers(path: Path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(flatten_linear_spec().to_json())
    return path


def test_a_spec_exports_with_seeded_random_weights(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    done = flowtrain(tmp_path, "export-onnx", str(spec))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "model.onnx"  # the default, in the working directory
    assert done.stdout.startswith(f"{out.name}: ONNX opset 17, ") and "random weights (seed 0)" in done.stdout
    y = ort.InferenceSession(str(out)).run(["output"], {"input": np.ones((2, 2, 6, 7), np.float32)})[0]
    assert y.shape == (2, 5)
    assert flowtrain(tmp_path, "export-onnx", str(spec), "--seed", "1", "--out", "seed1.onnx").returncode == 0
    a, b = initialisers(out), initialisers(tmp_path / "seed1.onnx")
    assert not np.array_equal(a["fc/weight"], b["fc/weight"])


def test_a_spec_exports_the_weights_it_is_given(tmp_path: Path) -> None:
    weights = random_canonical(validate(flatten_linear_spec()), seed=5)
    np.savez(tmp_path / "w.npz", **weights)
    done = flowtrain(tmp_path, "export-onnx", str(spec_file(tmp_path)), "--weights", "w.npz", "--out", "out/m.onnx")
    assert done.returncode == 0, done.stderr
    stored = initialisers(tmp_path / "out" / "m.onnx")
    for key, value in weights.items():
        np.testing.assert_array_equal(stored[key], value)


def test_weights_that_do_not_fit_are_refused_naming_each_key(tmp_path: Path) -> None:
    weights = random_canonical(validate(flatten_linear_spec()))
    weights.pop("fc/bias")
    weights["conv/weight"] = np.zeros((1, 1), np.float32)
    np.savez(tmp_path / "w.npz", **weights)
    done = flowtrain(tmp_path, "export-onnx", str(spec_file(tmp_path)), "--weights", "w.npz")
    assert done.returncode == 2
    assert "weights[fc/bias]: is missing; expected an array of shape (5,)" in done.stderr
    assert "weights[conv/weight]: does not fit the graph; received float32 (1, 1)" in done.stderr
    assert not (tmp_path / "model.onnx").exists()


def test_what_is_neither_a_spec_nor_a_run_is_refused(tmp_path: Path) -> None:
    missing = flowtrain(tmp_path, "export-onnx", "nothing.json")
    assert missing.returncode == 2 and "nothing.json: no such spec file, and not a run id" in missing.stderr
    no_run = flowtrain(tmp_path, "export-onnx", "20260101-000000-abcdef")
    assert no_run.returncode == 2 and "no run '20260101-000000-abcdef'" in no_run.stderr
    np.save(tmp_path / "one.npy", np.zeros(3))
    bad = flowtrain(tmp_path, "export-onnx", str(spec_file(tmp_path)), "--weights", "one.npy")
    assert bad.returncode == 2 and "one.npy cannot be read as canonical weights (.npz)" in bad.stderr


def test_an_admin_never_runs_the_interpreter_another_users_run_records(tmp_path: Path) -> None:
    """``export-onnx RUN --user alice`` by an administrator: alice's run names a program of her choosing
    as its interpreter (a tampered registry row); it is refused, not run as the administrator."""
    import json

    from schedulers.registry.runs import RunRegistry
    from settings.access import os_user

    marker = tmp_path / "ran-as-admin"
    evil = tmp_path / "evil-python"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    evil.chmod(0o755)
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[auth]\nadmins = ["{os_user()}"]\n', encoding="utf-8")
    run = RunRegistry(home=tmp_path / "home").create_run(
        user="alice", spec_json=flatten_linear_spec().to_json(), spec_hash="h", framework="torch", scheduler="local",
        environment=str(evil))
    (run.run_dir / "manifest.json").write_text(json.dumps({"framework": "torch"}), encoding="utf-8")
    (run.run_dir / "model").mkdir()
    (run.run_dir / "model" / "model.pt").write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_CONFIG=str(config), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "flowtrain", "export-onnx", run.id, "--user", "alice"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert not marker.exists(), "the run's recorded interpreter ran as the administrator"
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"records the interpreter '{evil}', which is not one of the configured environments'" in proc.stderr
