"""``python -m flowtrain predict`` and ``models`` on a real finished run.

One digits run is trained by the real generated torch program (examples/digits_cnn.json: resize to
28x28, scale, and a normalize whose mean/std are fitted on the training split), completes with its
``model.onnx``, and is then asked to predict its own validation samples as a user would hand them
in: raw 8x8 arrays (``.npy``/``.npz``) and CSV rows. The accuracy of those predictions must equal
the validation accuracy the training program reported, which only holds if predict preprocesses
exactly as training did (statistics included) and runs the same model. Two more runs do the same
for a folder of PNG files (class names from the folders) and for CSV rows of a regression run
(standardized; its validation loss).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_digits

from schedulers.base import RunState
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, cli_env, flowtrain, small_spec
from tests.finished_runs import FinishedRun

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

NAME = "digits_predict"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed local digits run (torch) whose normalize statistics come from its training split."""
    tmp = tmp_path_factory.mktemp("predict")
    home = tmp / "home"
    env = cli_env(home, tmp)
    spec = small_spec(tmp, preprocessing=[{"op": "resize", "size": [28, 28]}, {"op": "scale", "max_value": 16.0},
                                          {"op": "normalize"}])
    doc = json.loads(spec.read_text())
    doc["name"] = NAME
    spec.write_text(json.dumps(doc))
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait", "--max-steps", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    registry = RunRegistry(home=home)
    [run] = registry.list_runs(ME)
    assert run.state == RunState.COMPLETED and (run.run_dir / "model.onnx").is_file(), registry.history(run.id)
    return {"env": env, "tmp": tmp, "home": home, "run": registry.get(run.id), "result": registry.result(run.id)}


def _run_data(run: Run) -> ModuleType:
    """The run's own generated data.py (numpy only), for its split of the samples."""
    spec = importlib.util.spec_from_file_location("predict_test_data", run.run_dir / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _validation(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The run's validation samples as a user has them (raw 8x8 images, 0..16) and their labels."""
    digits = load_digits()
    rows = _run_data(run).split_indices(len(digits.target))["val"]
    return digits.images[rows], digits.target[rows]


def test_predict_on_the_validation_split_reproduces_the_reported_accuracy(trained: dict[str, Any]) -> None:
    run, tmp = trained["run"], trained["tmp"]
    x, y = _validation(run)
    np.save(tmp / "val.npy", x)
    out = tmp / "val.jsonl"
    done = flowtrain(trained["env"], "predict", run.id, str(tmp / "val.npy"), "--batch", "100", "--top", "2",
                     "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "statistics of normalize (step 3) recomputed from the training split" in done.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(y) > 100  # more than one batch
    assert [r["input"] for r in records[:2]] == [f"{tmp / 'val.npy'}[0]", f"{tmp / 'val.npy'}[1]"]
    assert all(len(r["top"]) == 2 and r["top"][0]["probability"] >= r["top"][1]["probability"] for r in records)
    accuracy = np.mean([r["class"] == str(label) for r, label in zip(records, y, strict=True)])
    assert accuracy == pytest.approx(trained["result"]["val_accuracy"], abs=1e-6)


def test_the_first_samples_as_a_table_by_the_run_name(trained: dict[str, Any]) -> None:
    run, tmp = trained["run"], trained["tmp"]
    x, _ = _validation(run)
    np.savez(tmp / "three.npz", x=x[:3, :, :, None])  # channels last: (N, H, W, C)
    done = flowtrain(trained["env"], "predict", NAME, str(tmp / "three.npz"), "--top", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"run {run.id} ({NAME}): 3 sample(s) through model.onnx")
    assert lines[1].split() == ["input", "class_1", "probability_1"]
    as_file = flowtrain(trained["env"], "predict", run.id, str(tmp / "three.npz"), "--top", "1",
                        "--out", str(tmp / "three.jsonl"))
    assert as_file.returncode == 0, as_file.stderr
    expected = [json.loads(line)["class"] for line in (tmp / "three.jsonl").read_text().splitlines()]
    assert [line.split()[1] for line in lines[2:]] == expected


def test_csv_rows_give_the_same_predictions_as_arrays(trained: dict[str, Any]) -> None:
    run, tmp = trained["run"], trained["tmp"]
    x, _ = _validation(run)
    features = [str(c) for c in load_digits().feature_names]
    with open(tmp / "rows.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", *features])
        writer.writerows([[i, *row.reshape(-1).tolist()] for i, row in enumerate(x[:5])])
    np.save(tmp / "five.npy", x[:5])
    from_csv = flowtrain(trained["env"], "predict", run.id, str(tmp / "rows.csv"), "--out", str(tmp / "csv.csv"))
    from_npy = flowtrain(trained["env"], "predict", run.id, str(tmp / "five.npy"), "--out", str(tmp / "npy.csv"))
    assert from_csv.returncode == 0 and from_npy.returncode == 0, from_csv.stderr + from_npy.stderr
    csv_rows = list(csv.reader(open(tmp / "csv.csv")))
    npy_rows = list(csv.reader(open(tmp / "npy.csv")))
    assert csv_rows[0] == npy_rows[0] == ["input", "class_1", "probability_1", "class_2", "probability_2",
                                          "class_3", "probability_3"]
    assert csv_rows[1][0] == f"{tmp / 'rows.csv'} line 2"
    assert [r[1:] for r in csv_rows[1:]] == [r[1:] for r in npy_rows[1:]] and len(csv_rows) == 6


def _refused(trained: dict[str, Any], *args: str) -> str:
    done = flowtrain(trained["env"], "predict", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: ")
    return done.stderr


def test_inputs_the_model_cannot_take_are_refused_saying_what_it_expects(trained: dict[str, Any]) -> None:
    run, tmp = trained["run"], trained["tmp"]
    np.save(tmp / "rgb.npy", np.zeros((2, 3, 8, 8), np.float32))
    assert "3 channels (shape (3, 8, 8)) but the model expects 1" in _refused(trained, run.id, str(tmp / "rgb.npy"))
    np.save(tmp / "flat.npy", np.zeros((2, 64), np.float32))
    message = _refused(trained, run.id, str(tmp / "flat.npy"))
    assert "shape (2, 64)" in message and "expected (N, 1, 28, 28)" in message
    np.save(tmp / "words.npy", np.asarray([["a"] * 8] * 8))
    assert "holds <U1 values; expected numbers" in _refused(trained, run.id, str(tmp / "words.npy"))
    (tmp / "bad.png").write_bytes(b"not a png at all")
    message = _refused(trained, run.id, str(tmp / "bad.png"))
    assert f"{tmp / 'bad.png'}: this run was trained on sklearn:digits (builtin), not on image files" in message
    with open(tmp / "few.csv", "w") as f:
        f.write("pixel_0_0,pixel_0_1\n1,2\n")
    message = _refused(trained, run.id, str(tmp / "few.csv"))
    assert "the feature columns pixel_0_2, pixel_0_3" in message and "(62 in all) are missing" in message
    assert "--out" in _refused(trained, run.id, str(tmp / "flat.npy"), "--out", str(tmp / "p.txt"))


def test_runs_without_a_model_and_other_users_runs_are_refused(trained: dict[str, Any]) -> None:
    run, home = trained["run"], trained["home"]
    registry = RunRegistry(home=home)
    spec_json = run.spec_json or ""
    failed = registry.create_run(user=ME, spec_json=spec_json, spec_hash=run.spec_hash, framework="torch",
                                 scheduler="local", name="broken")
    registry.mark_failed(failed.id, "the job could not be submitted")
    message = _refused(trained, "broken", "x.npy")
    assert f"run {failed.id} (broken) is FAILED: the job could not be submitted" in message

    waiting = registry.create_run(user=ME, spec_json=spec_json, spec_hash=run.spec_hash, framework="torch",
                                  scheduler="local", name="waiting")
    assert f"run {waiting.id} (waiting) is PENDING; only a completed run" in _refused(trained, "waiting", "x.npy")

    theirs = registry.create_run(user="someone-else", spec_json=spec_json, spec_hash=run.spec_hash,
                                 framework="torch", scheduler="local", name=NAME)
    assert f"no run '{theirs.id}' (by id or by name) for user {ME}" in _refused(trained, theirs.id, "x.npy")

    twin = registry.create_run(user=ME, spec_json=spec_json, spec_hash=run.spec_hash, framework="torch",
                               scheduler="local", name="twins")
    other = registry.create_run(user=ME, spec_json=spec_json, spec_hash=run.spec_hash, framework="torch",
                                scheduler="local", name="twins")
    message = _refused(trained, "twins", "x.npy")
    assert "2 runs are named 'twins'" in message and twin.id in message and other.id in message
    export = flowtrain(trained["env"], "export-onnx", "twins", "--out", str(trained["tmp"] / "twins.onnx"))
    assert export.returncode == 2 and "2 runs are named 'twins'" in export.stderr and twin.id in export.stderr

    model = run.run_dir / "model.onnx"
    shutil.move(model, run.run_dir / "model.onnx.aside")
    try:
        message = _refused(trained, run.id, "x.npy")
        assert f"has no model.onnx; write it with `python -m flowtrain export-onnx {run.id}" in message
    finally:
        shutil.move(run.run_dir / "model.onnx.aside", model)


def test_models_lists_completed_runs_with_their_final_metric(trained: dict[str, Any]) -> None:
    run = trained["run"]
    listed = flowtrain(trained["env"], "models", "--json")
    assert listed.returncode == 0, listed.stderr
    [model] = json.loads(listed.stdout)
    assert (model["id"], model["name"], model["framework"]) == (run.id, NAME, "torch")
    assert model["metric"] == f"val_accuracy {trained['result']['val_accuracy']:.4f}"
    assert model["onnx_bytes"] == (run.run_dir / "model.onnx").stat().st_size
    table = flowtrain(trained["env"], "models").stdout.splitlines()
    assert table[0].split()[:4] == ["RUN", "NAME", "FRAMEWORK", "FINAL"] and table[1].startswith(run.id)


def test_export_onnx_accepts_the_run_name(trained: dict[str, Any]) -> None:
    run, tmp = trained["run"], trained["tmp"]
    done = flowtrain(trained["env"], "export-onnx", NAME, "--out", str(tmp / "by-name.onnx"))
    assert done.returncode == 0, done.stderr
    assert f"weights from run {run.id} (torch)" in done.stdout
    assert (tmp / "by-name.onnx").read_bytes() == (run.run_dir / "model.onnx").read_bytes()


@pytest.fixture(scope="module")
def image_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed run trained on the digits as PNG files in a folder per class (d0 … d9), with
    scale (255, from uint8) and normalize fitted on its training split."""
    from PIL import Image

    tmp = tmp_path_factory.mktemp("predict_images")
    digits = load_digits()
    for i, (image, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        folder = tmp / "digits" / f"d{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.round(image * 255 / 16).astype(np.uint8), mode="L").save(folder / f"{i:04d}.png")
    home = tmp / "home"
    env = cli_env(home, tmp)
    spec = small_spec(tmp, source=str(tmp / "digits"), format="image_folder", input_shape=[1, 28, 28],
                      num_classes=10, preprocessing=[{"op": "resize", "size": [28, 28]}, {"op": "scale"},
                                                     {"op": "normalize"}])
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait", "--max-steps", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    registry = RunRegistry(home=home)
    [run] = registry.list_runs(ME)
    assert run.state == RunState.COMPLETED and (run.run_dir / "model.onnx").is_file(), registry.history(run.id)
    return {"env": env, "tmp": tmp, "run": registry.get(run.id), "result": registry.result(run.id)}


def test_a_folder_of_images_reproduces_the_reported_accuracy_with_class_names(image_run: dict[str, Any]) -> None:
    run, tmp = image_run["run"], image_run["tmp"]
    data = _run_data(run)
    source = data._image_files(tmp / "digits")
    val = tmp / "val"
    for row in data.split_indices(len(source))["val"]:
        file = Path(source.name(int(row)))  # digits/d3/0012.png
        (val / file.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(file, val / file.parent.name / file.name)
    done = flowtrain(image_run["env"], "predict", run.id, str(val), "--out", str(tmp / "val.jsonl"), "--batch", "64")
    assert done.returncode == 0, done.stderr
    assert "statistics of scale (step 2), normalize (step 3) recomputed" in done.stdout
    records = [json.loads(line) for line in (tmp / "val.jsonl").read_text().splitlines()]
    assert len(records) == len(list(val.rglob("*.png"))) > 64
    assert {r["class"] for r in records} <= {f"d{k}" for k in range(10)}
    accuracy = np.mean([r["class"] == Path(r["input"]).parent.name for r in records])
    assert accuracy == pytest.approx(image_run["result"]["val_accuracy"], abs=1e-6)


def test_a_corrupt_image_is_refused_naming_the_file(image_run: dict[str, Any]) -> None:
    run, tmp = image_run["run"], image_run["tmp"]
    bad = tmp / "new" / "scan.png"
    bad.parent.mkdir()
    bad.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    shutil.copy(next((tmp / "digits" / "d3").iterdir()), tmp / "new" / "good.png")
    done = flowtrain(image_run["env"], "predict", run.id, str(tmp / "new"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: {bad}: cannot read the image") and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def table_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed regression run on a CSV file (scikit-learn's diabetes, a text column it ignores),
    standardized with the training split's mean and std."""
    from sklearn.datasets import load_diabetes

    tmp = tmp_path_factory.mktemp("predict_table")
    diabetes = load_diabetes()
    features = [str(c) for c in diabetes.feature_names]
    with open(tmp / "diabetes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["note", *features, "target"])
        writer.writerows([[f"patient {i}", *row.tolist(), t] for i, (row, t) in
                          enumerate(zip(diabetes.data, diabetes.target, strict=True))])
    nodes = [{"id": "input", "op": "Input"}, {"id": "fc1", "op": "Linear", "params": {"out_features": 16}},
             {"id": "relu", "op": "ReLU"}, {"id": "fc2", "op": "Linear", "params": {"out_features": 1}},
             {"id": "output", "op": "Output"}]
    doc = {"name": "diabetes", "data": {"source": str(tmp / "diabetes.csv"), "format": "csv", "target": "target",
                                        "task": "regression", "input_shape": [len(features)], "batch_size": 32,
                                        "validation_split": 0.2, "num_workers": 0,
                                        "preprocessing": [{"op": "standardize"}]},
           "model": {"nodes": nodes, "edges": [{"source": a["id"], "target": b["id"]} for a, b in zip(nodes, nodes[1:])]},
           "training": {"epochs": 1, "loss": "mse", "optimizer": {"name": "adam", "lr": 0.01}, "log_every_steps": 2,
                        "resources": {"cpus_per_task": 1}}}
    (tmp / "spec.json").write_text(json.dumps(doc))
    home = tmp / "home"
    env = cli_env(home, tmp)
    out = flowtrain(env, "run", str(tmp / "spec.json"), "--scheduler", "local", "--wait", "--max-steps", "10")
    assert out.returncode == 0, out.stdout + out.stderr
    registry = RunRegistry(home=home)
    [run] = registry.list_runs(ME)
    assert run.state == RunState.COMPLETED and (run.run_dir / "model.onnx").is_file(), registry.history(run.id)
    return {"env": env, "tmp": tmp, "run": registry.get(run.id), "result": registry.result(run.id),
            "features": features, "data": diabetes}


def test_csv_rows_of_a_table_run_reproduce_its_validation_loss(table_run: dict[str, Any]) -> None:
    run, tmp, features, diabetes = table_run["run"], table_run["tmp"], table_run["features"], table_run["data"]
    rows = _run_data(run).split_indices(len(diabetes.target))["val"]
    with open(tmp / "new.csv", "w", newline="") as f:  # the feature columns in another order, no target
        writer = csv.writer(f)
        writer.writerow([*reversed(features), "comment"])
        writer.writerows([[*reversed(diabetes.data[i].tolist()), "x"] for i in rows])
    done = flowtrain(table_run["env"], "predict", "diabetes", str(tmp / "new.csv"), "--batch", "20",
                     "--out", str(tmp / "values.jsonl"))
    assert done.returncode == 0, done.stderr
    assert "statistics of standardize (step 1) recomputed" in done.stdout
    values = np.asarray([json.loads(line)["value"] for line in (tmp / "values.jsonl").read_text().splitlines()])
    assert values.shape == (len(rows),)
    mse = float(np.mean((values - diabetes.target[rows]) ** 2))
    assert mse == pytest.approx(table_run["result"]["val_loss"], rel=1e-4)


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_each_framework_s_own_model_agrees_with_onnxruntime(onnx_runs: dict[str, FinishedRun], framework: str) -> None:
    """The digits runs of tests/finished_runs.py (a small BatchNorm CNN, one per framework, shared with
    tests/frameworks/test_onnx_runs.py): predict through the framework's own saved model."""
    finished = onnx_runs[framework]
    assert finished.done.returncode == 0, finished.done.stdout[-2000:] + finished.done.stderr[-3000:]
    [run] = RunRegistry(home=finished.home).list_runs(ME)
    assert run.state == RunState.COMPLETED and run.framework == framework
    tmp = finished.tmp
    x, y = _validation(run)
    np.save(tmp / f"{framework}-val.npy", x)
    out = tmp / f"{framework}.jsonl"
    done = flowtrain(finished.env, "predict", run.id, str(tmp / f"{framework}-val.npy"), "--batch", "100",
                     "--framework", framework, "--out", str(out))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert f"sample(s) through {framework}'s model/model." in first
    difference = float(first.split("largest output difference from model.onnx: ")[1].split(";")[0])
    assert difference <= 1e-4  # on the logits
    assert f"the same top-1 class on {len(y)} of {len(y)} samples" in first and len(y) > 100
    top1 = [json.loads(line)["class"] for line in out.read_text().splitlines()]
    accuracy = np.mean([c == str(label) for c, label in zip(top1, y, strict=True)])
    assert accuracy == pytest.approx(RunRegistry(home=finished.home).result(run.id)["val_accuracy"], abs=1e-6)


def test_another_framework_than_the_run_s_is_refused(trained: dict[str, Any]) -> None:
    message = _refused(trained, trained["run"].id, "x.npy", "--framework", "keras")
    assert "was trained with torch, so only --framework torch (its own saved model) or onnx" in message
