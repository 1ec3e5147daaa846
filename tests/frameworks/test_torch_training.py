"""The generated PyTorch program trains, logs, saves, fails fast on bad data, resumes and runs DDP.

Every test generates a real program and runs it in a subprocess on scikit-learn's digits (1,797
8×8 images, upscaled to 28×28): small enough for a 2-core CI machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.codegen import generate
from core.load import load_spec
from core.spec import PipelineSpec
from tests.helpers import free_port, wait_until

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits_cnn.json"
PYTHON = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}


def variant(spec: PipelineSpec, data: dict[str, Any] | None = None, **training: Any) -> PipelineSpec:
    doc = spec.model_dump(mode="json")
    doc["data"].update(data or {})
    doc["training"].update(training)
    return PipelineSpec.model_validate(doc)


def program(spec: PipelineSpec, folder: Path) -> Path:
    generate(spec, "torch").write(folder)
    return folder


def run(folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "train.py", *args], cwd=folder, env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False)


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def state_dict(path: Path) -> dict[str, np.ndarray]:
    code = ("import sys, numpy, torch; s = torch.load(sys.argv[1], weights_only=True); "
            "numpy.savez(sys.argv[2], **{k: v.numpy() for k, v in s.items()})")
    out = path.with_suffix(".npz")
    subprocess.run([PYTHON, "-c", code, str(path), str(out)], check=True, capture_output=True)
    with np.load(out) as arrays:
        return {k: arrays[k] for k in arrays.files}


# ------------------------------------------------------------------------------------------ a full run


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], float]:
    folder = program(load_spec(EXAMPLE), tmp_path_factory.mktemp("digits"))
    start = time.perf_counter()
    result = run(folder)  # no arguments: writes beside train.py
    return folder, result, time.perf_counter() - start


def test_digits_example_reaches_95_percent_validation_accuracy(digits_run: Any) -> None:
    folder, result, seconds = digits_run
    assert result.returncode == 0, result.stderr[-3000:]
    spec = load_spec(EXAMPLE)
    epochs = [r for r in records(folder / "metrics.jsonl") if r["event"] == "epoch" and r["split"] == "val"]
    assert len(epochs) == spec.training.epochs <= 15
    assert epochs[-1]["accuracy"] >= 0.95, [round(r["accuracy"], 4) for r in epochs]
    result_json = json.loads((folder / "result.json").read_text())
    assert result_json["val_accuracy"] >= 0.95 and result_json["status"] == "completed"
    print(f"digits_cnn (torch): val accuracy {epochs[-1]['accuracy']:.4f} in {seconds:.0f} s "
          f"({[round(r['accuracy'], 3) for r in epochs]})")


def test_metrics_jsonl_follows_the_contract(digits_run: Any) -> None:
    folder, result, _ = digits_run
    assert result.returncode == 0, result.stderr[-3000:]
    rows = records(folder / "metrics.jsonl")
    assert rows[0]["event"] == "start" and rows[-1]["event"] == "end"
    assert rows[0]["framework"] == "torch" and rows[0]["world_size"] == 1 and rows[0]["resumed_from_step"] == 0
    assert rows[-1]["status"] == "completed"
    for row in rows:
        assert {"event", "step", "epoch", "elapsed", "time"} <= row.keys(), row
    steps = [r["step"] for r in rows]
    assert steps == sorted(steps)
    spec = load_spec(EXAMPLE)
    train = [r for r in rows if r["event"] == "train"]
    assert train and all(r["step"] % spec.training.log_every_steps == 0 for r in train)
    for r in train:
        assert {"split", "loss", "accuracy", "lr", "samples_per_s"} <= r.keys()
        assert r["split"] == "train" and r["samples_per_s"] > 0 and 0 <= r["accuracy"] <= 1
    for r in (r for r in rows if r["event"] == "epoch"):
        assert {"split", "loss", "accuracy", "lr"} <= r.keys() and r["split"] in ("train", "val")
    checkpoints = [r for r in rows if r["event"] == "checkpoint"]
    assert checkpoints and all(r["path"].startswith("checkpoints/ckpt-") for r in checkpoints)
    kept = sorted((folder / "checkpoints").glob("ckpt-*.pt"))
    assert len(kept) == spec.training.checkpoint.keep
    assert not list((folder / "checkpoints").glob("*.tmp"))
    assert "epoch 1/" in result.stdout and "samples/s" in result.stdout  # human-readable progress


def test_final_model_and_onnx_export_agree(digits_run: Any) -> None:
    folder, result, _ = digits_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert (folder / "model" / "model.pt").exists() and (folder / "model" / "model.onnx").exists()
    code = """
import numpy as np, onnxruntime, torch, model
m = model.build_model()
m.load_state_dict(torch.load("model/model.pt", weights_only=True))
x = np.random.default_rng(0).standard_normal((3, *model.INPUT_SHAPE)).astype("float32")
session = onnxruntime.InferenceSession("model/model.onnx", providers=["CPUExecutionProvider"])
print(float(np.max(np.abs(session.run(None, {"input": x})[0] - model.forward_numpy(m, x)))))
"""
    out = subprocess.run([PYTHON, "-c", code], cwd=folder, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip()) < 1e-4


# ------------------------------------------------------------------------------------------ bad data


def test_missing_data_file_fails_fast_with_exit_2(tmp_path: Path) -> None:
    spec = variant(load_spec(EXAMPLE), {"source": str(tmp_path / "digits" / "missing.npz"), "format": "npz", "preprocessing": [],
                                        "input_shape": [1, 8, 8], "num_classes": 10})
    folder = program(spec, tmp_path / "prog")
    start = time.perf_counter()
    result = run(folder, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "missing.npz" in result.stderr and "Traceback" not in result.stderr
    assert time.perf_counter() - start < 60
    assert not (folder / "checkpoints").exists()


def test_corrupt_csv_row_is_named_and_fails_with_exit_2(tmp_path: Path) -> None:
    rows = ["f1,f2,f3,f4,label"] + [f"{i % 7}.5,{i % 3}.0,1.0,2.0,{i % 3}" for i in range(40)]
    rows[18] = "1.0,oops,1.0,2.0,1"
    (tmp_path / "table.csv").write_text("\n".join(rows) + "\n")
    nodes = [{"id": "input", "op": "Input"}, {"id": "fc", "op": "Linear", "params": {"out_features": 3}},
             {"id": "output", "op": "Output"}]
    edges = [{"source": "input", "target": "fc"}, {"source": "fc", "target": "output"}]
    spec = PipelineSpec.model_validate({
        "name": "bad csv", "data": {"source": str(tmp_path / "table.csv"), "num_classes": 3, "input_shape": [4]},
        "model": {"nodes": nodes, "edges": edges}, "training": {"epochs": 1}})
    result = run(program(spec, tmp_path / "prog"), timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "table.csv" in result.stderr and "row 18" in result.stderr and "'oops'" in result.stderr, result.stderr


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    folder = program(load_spec(EXAMPLE), tmp_path)
    result = run(folder, "--epochs", "0", timeout=120)
    assert result.returncode == 2 and "--epochs must be at least 1" in result.stderr


# ------------------------------------------------------------------------------------------ fault tolerance


def resume_spec() -> PipelineSpec:
    """Two epochs of 12 steps (batch 128), a record every 2 steps and a checkpoint every 3."""
    return variant(load_spec(EXAMPLE), {"batch_size": 128}, epochs=2, log_every_steps=2,
                   checkpoint={"every_steps": 3, "every_epoch": True, "keep": 3})


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = program(resume_spec(), tmp_path_factory.mktemp("uninterrupted"))
    result = run(folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def wait_for_checkpoint(folder: Path, proc: subprocess.Popen[str], step: int) -> None:
    def reached() -> bool:
        assert proc.poll() is None, f"the run ended early with {proc.returncode}"
        return any(r["event"] == "checkpoint" and r["step"] >= step for r in records(folder / "metrics.jsonl"))

    wait_until(reached, timeout=300, interval=0.05, message=f"a checkpoint at step {step} or later")


@pytest.mark.resume
def test_kill_9_and_restart_finishes_with_the_same_steps_and_weights(uninterrupted: Path, tmp_path: Path) -> None:
    folder = program(resume_spec(), tmp_path)
    proc = subprocess.Popen([PYTHON, "train.py"], cwd=folder, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        wait_for_checkpoint(folder, proc, 9)
        last_seen = max(r["step"] for r in records(folder / "metrics.jsonl"))
        proc.kill()  # SIGKILL: no chance to write anything
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # a half-written newest checkpoint must be skipped, not crash the restart
    newest = max((folder / "checkpoints").glob("ckpt-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    truncated = folder / "checkpoints" / f"ckpt-{int(newest.stem.split('-')[1]) + 1}.pt"
    truncated.write_bytes(newest.read_bytes()[:1000])

    result = run(folder)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "skipping unreadable checkpoint" in result.stderr
    rows = records(folder / "metrics.jsonl")
    starts = [r for r in rows if r["event"] == "start"]
    assert len(starts) == 2
    resumed_from = starts[1]["resumed_from_step"]
    assert last_seen - resumed_from <= resume_spec().training.checkpoint.every_steps  # at most one interval lost
    expected = records(uninterrupted / "metrics.jsonl")[-1]
    assert rows[-1]["event"] == "end" and rows[-1]["step"] == expected["step"] == 24
    a, b = state_dict(uninterrupted / "model" / "model.pt"), state_dict(folder / "model" / "model.pt")
    assert max(float(np.max(np.abs(a[k] - b[k]))) for k in a) < 1e-5


@pytest.mark.resume
def test_sigterm_writes_a_checkpoint_exits_3_and_the_rerun_completes(uninterrupted: Path, tmp_path: Path) -> None:
    folder = program(resume_spec(), tmp_path)
    proc = subprocess.Popen([PYTHON, "train.py"], cwd=folder, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_checkpoint(folder, proc, 3)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stderr[-2000:]
    rows = records(folder / "metrics.jsonl")
    assert rows[-1]["event"] == "end" and rows[-1]["status"] == "stopped" and rows[-1]["signal"] == "SIGTERM"
    assert (folder / "checkpoints" / f"ckpt-{rows[-1]['step']}.pt").exists()

    result = run(folder)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = records(folder / "metrics.jsonl")
    assert rows[-1]["step"] == records(uninterrupted / "metrics.jsonl")[-1]["step"]
    assert [r for r in rows if r["event"] == "start"][1]["resumed_from_step"] > 0


# ------------------------------------------------------------------------------------------ data-parallel

# Runs train.main() and saves every rank's final parameters: the program itself writes only on rank 0.
RANK_PARAMS = """
import os, sys, torch
import train
models = []
build = train.build_model
def spy():
    models.append(build())
    return models[-1]
train.build_model = spy
code = train.main(sys.argv[1:])
torch.save(models[0].state_dict(), f"params-rank{os.environ['RANK']}.pt")
sys.exit(code)
"""


def assert_same_parameters(folder: Path, world: int = 2) -> None:
    ranks = [state_dict(folder / f"params-rank{r}.pt") for r in range(world)]
    assert ranks[0].keys() == ranks[1].keys()
    for key in ranks[0]:
        assert np.array_equal(ranks[0][key], ranks[1][key]), f"{key} differs between ranks"
    rows = records(folder / "out" / "metrics.jsonl")
    assert rows[0]["world_size"] == world and rows[-1]["status"] == "completed" and rows[-1]["step"] == 8


@pytest.mark.ddp
def test_torchrun_two_processes_keep_identical_parameters(tmp_path: Path) -> None:
    folder = program(variant(load_spec(EXAMPLE), log_every_steps=4), tmp_path)
    (folder / "rank_params.py").write_text(RANK_PARAMS)
    result = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                             "--master-port", str(free_port()), "rank_params.py", "--max-steps", "8", "--out", "out"],
                            cwd=folder, env=ENV, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    assert_same_parameters(folder)


@pytest.mark.ddp
def test_srun_style_slurm_variables_start_data_parallel_training(tmp_path: Path) -> None:
    """One process per task with only Slurm's variables set, as `srun python train.py` starts them."""
    folder = program(variant(load_spec(EXAMPLE), log_every_steps=4), tmp_path)
    (folder / "rank_params.py").write_text(RANK_PARAMS.replace("os.environ['RANK']", "os.environ['SLURM_PROCID']"))
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = {k: v for k, v in ENV.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
        env.update({"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(rank),
                    "SLURM_JOB_NODELIST": "localhost", "SLURM_JOB_ID": "4242", "MASTER_PORT": port,
                    "OMP_NUM_THREADS": "1"})
        procs.append(subprocess.Popen([PYTHON, "rank_params.py", "--max-steps", "8", "--out", "out"], cwd=folder,
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-4000:]
    assert_same_parameters(folder)


# ------------------------------------------------------------------------------------------ training options


def tabular(source: str, out: int, **training: Any) -> PipelineSpec:
    nodes = [{"id": "input", "op": "Input"}, {"id": "fc1", "op": "Linear", "params": {"out_features": 16}},
             {"id": "act", "op": "ReLU"}, {"id": "fc2", "op": "Linear", "params": {"out_features": out}},
             {"id": "output", "op": "Output"}]
    edges = [{"source": a, "target": b} for a, b in
             (("input", "fc1"), ("fc1", "act"), ("act", "fc2"), ("fc2", "output"))]
    task = "regression" if training.get("loss") in ("mse", "mae") else "classification"
    return PipelineSpec.model_validate({
        "name": "tabular", "data": {"source": source, "task": task, "preprocessing": [{"op": "standardize"}],
                                    "test_split": 0.2, "batch_size": 32},
        "model": {"nodes": nodes, "edges": edges}, "training": {"log_every_steps": 5, **training}})


OPTION_VARIANTS = {
    # SGD + Nesterov, step schedule, clipping, DataLoader workers instead of device-resident data, all augmentations
    "images-sgd-step-augment-loader": lambda: variant(
        load_spec(EXAMPLE), {"augmentation": [{"op": "random_crop", "padding": 2}, {"op": "horizontal_flip"},
                                              {"op": "rotation"}, {"op": "color_jitter"}, {"op": "gaussian_noise"}],
                             "num_workers": 1},
        optimizer={"name": "sgd", "lr": 0.05, "nesterov": True, "weight_decay": 5e-4},
        schedule={"name": "step", "step_size": 1, "gamma": 0.5}, gradient_clip_norm=1.0, epochs=2,
        samples_per_epoch=640,
        performance={"device_data": "off"}),
    "regression-adam-plateau": lambda: tabular("sklearn:wine", 1, loss="mse", epochs=3, optimizer={"name": "adam"},
                                               schedule={"name": "plateau", "patience": 0}),
    "regression-mae-warmup": lambda: tabular("sklearn:wine", 1, loss="mae", epochs=3,
                                             schedule={"name": "warmup_cosine", "warmup_epochs": 1}),
    "binary-early-stopping": lambda: tabular("sklearn:breast_cancer", 1, loss="bce_with_logits", epochs=30,
                                             early_stopping={"patience": 1, "monitor": "val_accuracy",
                                                             "min_delta": 0.5}),
}


@pytest.mark.parametrize("name", sorted(OPTION_VARIANTS))
def test_training_options_run_end_to_end(name: str, tmp_path: Path) -> None:
    spec = OPTION_VARIANTS[name]()
    result = run(program(spec, tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = records(tmp_path / "metrics.jsonl")
    end = rows[-1]
    assert end["event"] == "end" and end["status"] == "completed"
    keys = {"mse", "mae"} if spec.data.task == "regression" else {"accuracy"}
    assert all(keys <= r.keys() for r in rows if r["event"] in ("train", "epoch", "test"))
    result_json = json.loads((tmp_path / "result.json").read_text())
    if spec.data.test_split:
        assert {f"test_{k}" for k in keys} <= result_json.keys()
    epochs = [r for r in rows if r["event"] == "epoch" and r["split"] == "val"]
    if name == "binary-early-stopping":  # no epoch can improve accuracy by 0.5: stops after patience + 1 epochs
        assert len(epochs) == 2 and "early stopping" in result.stdout
    if name == "regression-adam-plateau":  # patience 0: the rate falls whenever the validation loss does not
        lrs = [r["lr"] for r in epochs]
        assert lrs == sorted(lrs, reverse=True)
    if name == "images-sgd-step-augment-loader":
        assert rows[0]["device_data"] is False
        lrs = [r["lr"] for r in epochs]
        assert lrs[1] == pytest.approx(lrs[0] * 0.5)
