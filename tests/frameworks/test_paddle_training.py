"""The generated PaddlePaddle training program, run for real in subprocesses.

- examples/digits_cnn.json reaches >= 95 % validation accuracy, writing metrics.jsonl per the
  contract (docs/generated-program.md), checkpoints and the final model;
- bad data stops the run at once with exit code 2 and a message naming the file and row;
- kill -9 mid-epoch, run again: it resumes from the newest valid checkpoint (a truncated one is
  skipped) and ends with the same number of optimizer steps — and the same weights — as an
  uninterrupted run; SIGTERM writes a checkpoint and exits 3 (marker ``resume``);
- two processes under ``paddle.distributed.launch`` on CPU end with identical parameters
  (marker ``ddp``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.codegen import generate
from core.load import load_spec, spec_from_dict
from tests.helpers import wait_until

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ENV = {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": "", "PYTHONWARNINGS": "ignore"}


def write_program(spec: Any, folder: Path) -> Path:
    generate(spec, "paddle").write(folder)
    return folder


def train(folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "train.py", *args], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]  # the last line may be half-written


def small_cnn(**training: Any) -> Any:
    """A small CNN on scikit-learn digits at 16x16: a few seconds per run, with dropout (RNG state)."""
    nodes = [{"id": "input", "op": "Input"},
             {"id": "conv1", "op": "Conv2d", "params": {"out_channels": 16, "kernel_size": 3}},
             {"id": "relu1", "op": "ReLU"},
             {"id": "conv2", "op": "Conv2d", "params": {"out_channels": 32, "kernel_size": 3}},
             {"id": "bn", "op": "BatchNorm2d"},
             {"id": "relu2", "op": "ReLU"},
             {"id": "pool", "op": "MaxPool2d", "params": {"kernel_size": 2}},
             {"id": "drop", "op": "Dropout", "params": {"p": 0.25}},
             {"id": "flat", "op": "Flatten"},
             {"id": "fc", "op": "Linear", "params": {"out_features": 10}},
             {"id": "output", "op": "Output"}]
    ids = [n["id"] for n in nodes]
    doc = {
        "name": "small_cnn",
        "data": {"source": "sklearn:digits", "batch_size": 32, "validation_split": 0.2,
                 "preprocessing": [{"op": "resize", "size": [16, 16]}, {"op": "scale", "max_value": 16.0}]},
        "model": {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:])]},
        "training": {"epochs": 2, "optimizer": {"name": "adamw", "lr": 0.002}, "schedule": {"name": "cosine"},
                     "log_every_steps": 5, "checkpoint": {"every_steps": 5, "keep": 3}, **training},
    }
    return spec_from_dict(doc)


def final_weights(out: Path) -> dict[str, np.ndarray]:
    """model/model.pdparams read back in a paddle subprocess (the test process imports no framework)."""
    code = ("import sys, numpy as np, paddle; state = paddle.load(sys.argv[1]); "
            "np.savez(sys.argv[2], **{k: v.numpy() for k, v in state.items()})")
    target = out / "weights.npz"
    proc = subprocess.run([PYTHON, "-c", code, str(out / "model" / "model.pdparams"), str(target)],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(target) as data:
        return {k: data[k] for k in data.files}


# --------------------------------------------------------------------------- accuracy and the metrics contract


@pytest.mark.slow
def test_digits_cnn_reaches_95_percent_and_writes_the_contract(tmp_path: Path) -> None:
    folder = write_program(load_spec(ROOT / "examples" / "digits_cnn.json"), tmp_path / "digits_cnn")
    proc = train(folder)  # no arguments: writes everything beside train.py
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "completed" and result["framework"] == "paddle"
    assert result["val_accuracy"] >= 0.95, result

    log = records(folder / "metrics.jsonl")
    for record in log:
        assert {"event", "step", "epoch", "elapsed", "time"} <= set(record), record
    events = [r["event"] for r in log]
    assert events[0] == "start" and events[-1] == "end"
    start, end = log[0], log[-1]
    assert start["framework"] == "paddle" and start["world_size"] == 1 and start["resumed_from_step"] == 0
    steps_per_epoch = start["steps_per_epoch"]
    epochs = start["epochs"]
    assert end["status"] == "completed" and end["step"] == result["steps"] == epochs * steps_per_epoch
    train_records = [r for r in log if r["event"] == "train"]
    assert [r["step"] for r in train_records] == list(range(10, epochs * steps_per_epoch + 1, 10))
    for r in train_records:
        assert r["split"] == "train" and {"loss", "accuracy", "lr", "samples_per_s"} <= set(r)
        assert r["epoch"] == (r["step"] - 1) // steps_per_epoch  # 0-based
    val = [r for r in log if r["event"] == "epoch" and r["split"] == "val"]
    assert [r["epoch"] for r in val] == list(range(epochs))
    assert [r["step"] for r in val] == [steps_per_epoch * (e + 1) for e in range(epochs)]
    assert all({"loss", "accuracy", "lr"} <= set(r) for r in val)
    elapsed = [r["elapsed"] for r in log]
    assert elapsed == sorted(elapsed)
    checkpoints = [r for r in log if r["event"] == "checkpoint"]
    assert checkpoints and all((folder / r["path"]).exists() for r in checkpoints[-2:])
    assert (folder / "model" / "model.pdparams").exists()
    assert "epoch 1/" in proc.stdout and "samples/s" in proc.stdout


# --------------------------------------------------------------------------- bad data


def test_bad_data_fails_fast_naming_file_and_row(tmp_path: Path) -> None:
    data_root = tmp_path / "data"
    data_root.mkdir()
    rows = ["a,b,label"] + [f"{i * 0.1},{i % 7},{i % 2}" for i in range(30)]
    rows[18] = "0.5,seven,1"  # line 18 of the file: a word where a number belongs
    (data_root / "table.csv").write_text("\n".join(rows) + "\n")
    nodes = [{"id": "input", "op": "Input"}, {"id": "fc", "op": "Linear", "params": {"out_features": 2}},
             {"id": "output", "op": "Output"}]
    spec = spec_from_dict({
        "name": "bad_rows",
        "data": {"source": str(data_root / "table.csv"), "target": "label", "num_classes": 2, "input_shape": [2]},
        "model": {"nodes": nodes, "edges": [{"source": "input", "target": "fc"}, {"source": "fc", "target": "output"}]},
        "training": {"epochs": 1},
    })
    folder = write_program(spec, tmp_path / "bad")
    proc = train(folder, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "table.csv" in proc.stderr and "seven" in proc.stderr, proc.stderr
    assert "row" in proc.stderr or "line" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr

    (data_root / "table.csv").unlink()
    missing = train(folder, timeout=300)
    assert missing.returncode == 2 and "table.csv does not exist" in missing.stderr, missing.stderr


# --------------------------------------------------------------------------- fault tolerance


@pytest.mark.resume
def test_kill_9_then_restart_ends_like_an_uninterrupted_run(tmp_path: Path) -> None:
    folder = write_program(small_cnn(epochs=3), tmp_path / "program")
    reference = train(folder, "--out", str(tmp_path / "reference"), "--resume", "never")
    assert reference.returncode == 0, reference.stderr[-5000:]
    expected = json.loads((tmp_path / "reference" / "result.json").read_text())

    out = tmp_path / "interrupted"
    metrics = out / "metrics.jsonl"
    proc = subprocess.Popen([PYTHON, "train.py", "--out", str(out)], cwd=folder, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(r["event"] == "checkpoint" and r["step"] >= 10 for r in records(metrics)),
                   timeout=300, interval=0.01, message="a checkpoint at step 10 or later")
    finally:
        proc.kill()  # kill -9: no chance to write anything more
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    before = records(metrics)
    last_step = max(r["step"] for r in before)
    assert not any(r["event"] == "end" for r in before)

    # a newer checkpoint that was cut short must be skipped with a warning
    checkpoints = out / "checkpoints"
    newest = max(checkpoints.glob("ckpt-*.npz"), key=lambda p: int(p.stem.split("-")[1]))
    data = newest.read_bytes()
    (checkpoints / "ckpt-99999.npz").write_bytes(data[: len(data) // 2])

    resumed = train(folder, "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    assert "skipping unreadable checkpoint" in resumed.stderr and "ckpt-99999" in resumed.stderr
    after = records(metrics)[len(before):]
    start = after[0]
    assert start["event"] == "start"
    resumed_from = start["resumed_from_step"]
    assert resumed_from >= 10 and resumed_from >= last_step - 5, (resumed_from, last_step)  # <= one interval lost
    result = json.loads((out / "result.json").read_text())
    assert result["steps"] == expected["steps"] == after[-1]["step"]
    # data order, RNG states, optimizer and schedule all resume exactly: the same final weights
    want, got = final_weights(tmp_path / "reference"), final_weights(out)
    assert set(want) == set(got)
    assert max(float(np.abs(want[k] - got[k]).max()) for k in want) < 1e-4


@pytest.mark.resume
def test_sigterm_writes_a_checkpoint_and_exits_3(tmp_path: Path) -> None:
    folder = write_program(small_cnn(epochs=3), tmp_path / "program")
    out = tmp_path / "out"
    metrics = out / "metrics.jsonl"
    proc = subprocess.Popen([PYTHON, "train.py", "--out", str(out)], cwd=folder, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(r["event"] == "train" for r in records(metrics)), timeout=300, interval=0.01,
                   message="the first train record")
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, stdout[-2000:] + stderr[-3000:]
    log = records(metrics)
    end = log[-1]
    assert end["event"] == "end" and end["status"] == "stopped" and end["signal"] == "SIGTERM"
    saved = [r for r in log if r["event"] == "checkpoint" and r["step"] == end["step"]]
    assert saved and (out / saved[0]["path"]).exists()
    again = train(folder, "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert records(metrics)[len(log)]["resumed_from_step"] == end["step"]


# --------------------------------------------------------------------------- data-parallel


_RANK_WRAPPER = """
import sys

import numpy as np
import paddle.distributed as dist

import model
import train

built = []
original = train.build_model


def build_and_keep():
    built.append(original())
    return built[-1]


train.build_model = build_and_keep
code = train.main(sys.argv[1:])
state = built[0].state_dict()
np.savez(f"rank{dist.get_rank()}.npz", **{k: v.numpy() for k, v in state.items()})
sys.exit(code)
"""


@pytest.mark.ddp
def test_two_processes_end_with_identical_parameters(tmp_path: Path) -> None:
    folder = write_program(small_cnn(epochs=1), tmp_path / "program")
    (folder / "ranks.py").write_text(_RANK_WRAPPER)
    out = tmp_path / "out"
    proc = subprocess.run([PYTHON, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
                           "--log_dir", str(tmp_path / "launch"), "ranks.py", "--out", str(out)],
                          cwd=folder, capture_output=True, text=True, timeout=600, env=ENV)
    logs = "".join(p.read_text(errors="replace")[-3000:] for p in sorted((tmp_path / "launch").glob("workerlog.*")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logs
    ranks = []
    for r in (0, 1):
        with np.load(folder / f"rank{r}.npz") as data:
            ranks.append({k: data[k] for k in data.files})
    assert set(ranks[0]) == set(ranks[1]) and ranks[0]
    for key in ranks[0]:
        if key.endswith(("_mean", "_variance")):
            continue  # BatchNorm statistics are per rank (each sees its own shard), as in torch DDP
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key], err_msg=key)
    log = records(out / "metrics.jsonl")
    start = log[0]
    assert start["world_size"] == 2 and start["compile"] is False
    single = -(-1437 // 32)
    assert start["steps_per_epoch"] == -(-(1437 // 2) // 32) < single  # each rank takes half the data
    assert log[-1]["event"] == "end" and log[-1]["status"] == "completed"
    assert sum(r["event"] == "start" for r in log) == 1  # only rank 0 writes
