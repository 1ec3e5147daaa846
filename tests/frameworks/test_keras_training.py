"""The generated Keras training program, run for real (TensorFlow in subprocesses).

Accuracy on the digits example, the metrics.jsonl contract, bad data, kill -9 and SIGTERM
followed by a resume, and two-process MultiWorkerMirroredStrategy training.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.codegen import generate
from core.load import load_spec
from core.spec import PipelineSpec
from core.zoo.builder import GraphBuilder
from tests.helpers import free_port_pair, wait_until

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
EXAMPLE = ROOT / "examples" / "digits_cnn.json"


def program(spec: PipelineSpec, folder: Path) -> Path:
    generate(spec, "keras").write(folder)
    return folder


def run(folder: Path, *args: str, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "train.py", *args], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def records(folder: Path) -> list[dict]:
    """metrics.jsonl so far (a line being written while we read is left for the next poll)."""
    path = folder / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def small_spec(**training: object) -> PipelineSpec:
    """A small BatchNorm CNN on the 8×8 digits (fast on two shared cores)."""
    g = GraphBuilder()
    x = g.add("Input", id="input")
    x = g.chain(x, ("Conv2d", {"out_channels": 8, "kernel_size": 3, "padding": 1}), ("BatchNorm2d", {}),
                ("ReLU", {}), ("MaxPool2d", {"kernel_size": 2}), ("Flatten", {}), ("Dropout", {"p": 0.2}),
                ("Linear", {"out_features": 10}))
    g.add("Output", x, id="output")
    data = {"source": "sklearn:digits", "batch_size": 32, "validation_split": 0.2,
            "preprocessing": [{"op": "scale", "max_value": 16.0}],
            "augmentation": [{"op": "random_crop", "padding": 1}, {"op": "gaussian_noise", "std": 0.01}]}
    base: dict[str, object] = {"epochs": 2, "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9,
                                                           "weight_decay": 1e-4},
                               "schedule": {"name": "step", "step_size": 1, "gamma": 0.5},
                               "gradient_clip_norm": 5.0, "log_every_steps": 5,
                               "checkpoint": {"every_steps": 10, "every_epoch": True, "keep": 3}}
    return g.spec("small_cnn", "", data, {**base, **training})


def check_metrics(rows: list[dict], epochs: int, classification: bool = True) -> None:
    """The metrics.jsonl contract of docs/generated-program.md."""
    assert rows[0]["event"] == "start" and rows[0]["framework"] == "keras"
    assert rows[-1]["event"] == "end" and rows[-1]["status"] == "completed"
    for row in rows:
        assert {"event", "step", "epoch", "elapsed", "time"} <= set(row), row
    metric_keys = {"loss", "accuracy"} if classification else {"loss", "mse", "mae"}
    train = [r for r in rows if r["event"] == "train"]
    assert train, "no train records"
    for r in train:
        assert metric_keys | {"split", "lr", "samples_per_s"} <= set(r), r
        assert r["samples_per_s"] > 0
    per_epoch = [r for r in rows if r["event"] == "epoch"]
    assert sorted({(r["epoch"], r["split"]) for r in per_epoch}) == sorted(
        {(e, s) for e in range(epochs) for s in ("train", "val")})
    for r in per_epoch:
        assert metric_keys <= set(r)
    steps = [r["step"] for r in rows]
    assert steps == sorted(steps), "steps go backwards"
    assert any(r["event"] == "checkpoint" for r in rows)


def test_digits_cnn_reaches_95_percent(tmp_path: Path) -> None:
    folder = program(load_spec(str(EXAMPLE)), tmp_path / "digits")
    done = run(folder)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((folder / "result.json").read_text())
    assert result["val_accuracy"] >= 0.95, result
    rows = records(folder)
    check_metrics(rows, epochs=load_spec(str(EXAMPLE)).training.epochs)
    assert (folder / "model" / "model.keras").is_file()
    assert sorted(p.name for p in (folder / "checkpoints").iterdir())  # kept checkpoints
    assert "val_accuracy" in done.stdout


def test_bad_data_fails_at_once_naming_the_file(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    g.add("Output", g.chain(x, ("Linear", {"out_features": 3})), id="output")
    spec = g.spec("table", "", {"source": str(tmp_path / "flowers.csv"), "format": "csv", "target": "label", "num_classes": 3,
                                "input_shape": [2], "validation_split": 0.25}, {"epochs": 1})
    folder = program(spec, tmp_path / "bad")
    rows = ["a,b,label"] + [f"{i},{i + 1},{i % 3}" for i in range(7)] + ["4,oops,1"]
    (tmp_path / "flowers.csv").write_text("\n".join(rows) + "\n")
    done = run(folder, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "flowers.csv" in done.stderr and "Traceback" not in done.stderr
    assert not (folder / "result.json").exists()


def _digits(folder: Path) -> dict:
    return json.loads((folder / "result.json").read_text())


@pytest.mark.resume
def test_kill_9_then_resume_finishes_the_same_steps(tmp_path: Path) -> None:
    spec = small_spec()
    straight = program(spec, tmp_path / "straight")
    done = run(straight)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = _digits(straight)

    folder = program(spec, tmp_path / "killed")
    proc = subprocess.Popen([PYTHON, "train.py"], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_until(lambda: any(r["event"] == "checkpoint" and r["step"] >= 10 for r in records(folder))
                   or proc.poll() is not None, timeout=300, message="a checkpoint at step 10")
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_at = max(r["step"] for r in records(folder))
    newest = max(r["step"] for r in records(folder) if r["event"] == "checkpoint")
    (folder / "checkpoints" / "ckpt-999999.npz").write_bytes(b"PK\x03\x04 truncated")  # a torn write is skipped

    done = run(folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skipping unreadable checkpoint" in done.stderr
    result = _digits(folder)
    assert result["steps"] == expected["steps"]
    starts = [r for r in records(folder) if r["event"] == "start"]
    assert starts[-1]["resumed_from_step"] == newest
    assert killed_at - newest <= 10  # at most one checkpoint interval of work lost
    # the data order, augmentation and dropout are functions of (seed, step): the same run as uninterrupted
    assert result["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-3)


@pytest.mark.resume
def test_sigterm_writes_a_checkpoint_and_exits_3(tmp_path: Path) -> None:
    folder = program(small_spec(epochs=3), tmp_path / "term")
    proc = subprocess.Popen([PYTHON, "train.py"], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_until(lambda: any(r["event"] == "train" for r in records(folder)) or proc.poll() is not None,
                   timeout=300, message="the first train record")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 3, proc.stderr.read()[-2000:] if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    end = records(folder)[-1]
    assert end["event"] == "end" and end["status"] == "stopped" and end["signal"] == "SIGTERM"
    assert (folder / "checkpoints" / f"ckpt-{end['step']}.npz").is_file()
    done = run(folder, "--max-steps", str(end["step"] + 5))
    assert done.returncode == 0, done.stderr[-3000:]
    assert _digits(folder)["steps"] == end["step"] + 5


DRIVER = r"""
import sys
import numpy as np
import train

built = []
original = train.build_model


def capture():
    model = original()
    built.append(model)
    return model


train.build_model = capture
code = train.main(sys.argv[2:])
np.savez(sys.argv[1], *[np.asarray(v) for v in built[0].variables])
sys.exit(code)
"""


@pytest.mark.ddp
def test_two_workers_end_with_identical_weights(tmp_path: Path) -> None:
    """MultiWorkerMirroredStrategy from Slurm's variables (srun --ntasks 2 on one node), on CPU."""
    folder = program(small_spec(epochs=1), tmp_path / "ddp")
    (folder / "driver.py").write_text(DRIVER)
    job = str(random.randint(1, 19_000))
    master_port = str(free_port_pair() - 1)  # worker r listens on MASTER_PORT + 1 + r, as in the job script
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "MASTER_PORT": master_port, "SLURM_JOB_ID": job,
               "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2",
               "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "2",
               "SLURM_NTASKS_PER_NODE": "2"}
        procs.append(subprocess.Popen([PYTHON, "driver.py", str(tmp_path / f"w{rank}.npz"), "--max-steps", "12"],
                                      cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=400))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    w0, w1 = np.load(tmp_path / "w0.npz"), np.load(tmp_path / "w1.npz")
    assert len(w0.files) == len(w1.files) > 0
    for key in w0.files:
        np.testing.assert_array_equal(w0[key], w1[key], err_msg=f"variable {key} differs between the workers")
    rows = records(folder)
    assert rows[0]["world_size"] == 2 and rows[-1]["steps"] == 12


SAME_START = r"""
import importlib, json, sys
import numpy as np

codes = {}
for folder, start, final in json.loads(sys.argv[1]):
    sys.path.insert(0, folder)
    for name in ("train", "data", "model", "runtime", "loop", "devices", "optim"):
        sys.modules.pop(name, None)
    network, train = importlib.import_module("model"), importlib.import_module("train")
    built = []

    def same_start(build=train.build_model, network=network, built=built, start=start):
        model = build()
        network.load_canonical_weights(model, dict(np.load(start)))
        built.append(model)
        return model

    train.build_model = same_start
    codes[folder] = train.main(["--out", folder + "/run"])
    np.savez(final, **network.canonical_weights(built[0]))
    sys.path.remove(folder)
print(json.dumps(codes))
"""

# (optimizer, schedule, gradient clip norm, other training settings)
OPTIMIZER_CASES = {
    "sgd-nesterov-step-clip-l2": ({"name": "sgd", "lr": 0.2, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
                                  {"name": "step", "step_size": 1, "gamma": 0.5}, 0.5, {}),
    "adamw-warmup-cosine": ({"name": "adamw", "lr": 0.02, "weight_decay": 0.1},
                            {"name": "warmup_cosine", "warmup_epochs": 1}, None, {}),
    "adam-l2-cosine-clip": ({"name": "adam", "lr": 0.02, "weight_decay": 0.01}, {"name": "cosine"}, 1.0, {}),
    "sgd-plateau-smoothing": ({"name": "sgd", "lr": 0.3, "momentum": 0.5}, {"name": "plateau", "patience": 0,
                                                                           "factor": 0.5}, None,
                              {"label_smoothing": 0.1, "epochs": 4}),
}


def tabular_spec(optimizer: dict, schedule: dict, clip: float | None, **extra: object) -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="input")
    g.add("Output", g.chain(x, ("Linear", {"out_features": 8}), ("Tanh", {}), ("Linear", {"out_features": 3})),
          id="output")
    data = {"source": "sklearn:iris", "batch_size": 16, "validation_split": 0.2, "shuffle": False,
            "preprocessing": [{"op": "standardize"}]}
    training = {"epochs": 3, "optimizer": optimizer, "schedule": schedule, "gradient_clip_norm": clip,
                "log_every_steps": 4, "checkpoint": {"every_steps": None, "every_epoch": False}, **extra}
    return g.spec("iris", "", data, training)


def test_training_matches_the_torch_program(tmp_path: Path) -> None:
    """The same start, data and batches: Keras's and torch's programs end with the same weights
    (optimizer, weight-decay meaning, schedule, clipping and loss agree step for step)."""
    from core.validate import validate
    from core.weights import random_canonical

    jobs: dict[str, list[list[str]]] = {"keras": [], "torch": []}
    for case, (optimizer, schedule, clip, extra) in OPTIMIZER_CASES.items():
        spec = tabular_spec(optimizer, schedule, clip, **extra)
        start = tmp_path / f"{case}-start.npz"
        np.savez(start, **random_canonical(validate(spec), seed=5))
        for framework, framework_jobs in jobs.items():
            folder = tmp_path / framework / case
            generate(spec, framework).write(folder)
            framework_jobs.append([str(folder), str(start), str(tmp_path / f"{case}-{framework}.npz")])
    for framework, framework_jobs in jobs.items():
        done = subprocess.run([PYTHON, "-c", SAME_START, json.dumps(framework_jobs)], capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{framework}: {done.stderr[-3000:]}"
        assert set(json.loads(done.stdout.strip().splitlines()[-1]).values()) == {0}, done.stderr[-3000:]
    for case in OPTIMIZER_CASES:
        start = dict(np.load(tmp_path / f"{case}-start.npz"))
        torch_final = dict(np.load(tmp_path / f"{case}-torch.npz"))
        keras_final = dict(np.load(tmp_path / f"{case}-keras.npz"))
        for key, value in torch_final.items():
            assert np.abs(value - start[key]).max() > 1e-3, f"{case}: {key} did not train"
            np.testing.assert_allclose(keras_final[key], value, atol=2e-5, rtol=1e-4, err_msg=f"{case}: {key}")


MANY = r"""
import importlib, json, sys
import keras

results = {}
for folder in sys.argv[1:]:
    sys.path.insert(0, folder)
    for name in ("train", "data", "model", "runtime", "loop", "devices", "optim"):
        sys.modules.pop(name, None)
    train = importlib.import_module("train")
    results[folder] = train.main(["--max-steps", "3", "--out", folder + "/run"])
    sys.path.remove(folder)
    keras.mixed_precision.set_global_policy("float32")
    keras.backend.clear_session()
print(json.dumps(results))
"""


def test_template_branches_run(tmp_path: Path) -> None:
    """Every augmentation, label smoothing, plateau + early stopping + clipping + L2 SGD, step + Adam,
    warm-up cosine with bf16 and XLA, regression (MAE) and binary cross-entropy: three steps each, in one process."""
    from tests.mapping.test_keras_mapping import _variants

    variants = _variants()
    names = ["augment_all", "plateau_early", "step_adam_acc", "regression", "binary", "warmup_bf16"]
    folders = []
    for name in names:
        generate(variants[name], "keras").write(tmp_path / name)
        folders.append(str(tmp_path / name))
    done = subprocess.run([PYTHON, "-c", MANY, *folders], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    assert codes == {f: 0 for f in folders}, done.stderr[-3000:]
    for folder in folders:
        result = json.loads((Path(folder) / "run" / "result.json").read_text())
        assert result["steps"] == 3
        rows = records(Path(folder) / "run")
        assert rows[-1]["event"] == "end"
    regression = json.loads((tmp_path / "regression" / "run" / "result.json").read_text())
    assert {"val_loss", "val_mse", "val_mae"} <= set(regression)
    assert "test_accuracy" in json.loads((tmp_path / "augment_all" / "run" / "result.json").read_text())
