"""``python -m flowtrain predict`` on text lines, for a run of the zoo's text pipeline.

The zoo's ``lstm_text_classifier`` (tokenize a CSV text column, embedding, bidirectional LSTM),
made small (a 500-word vocabulary, 32 tokens, 16 units) and trained by the real torch program for
one epoch on its example data (``flowtrain example-data``'s reviews.csv). Its validation texts,
handed in as a ``.txt`` file one per line, must give back the validation accuracy the training
program reported: that only holds if predict tokenizes with the run's own data.py and the
vocabulary of its training split.
"""

from __future__ import annotations

import csv
import json
from typing import Any

import numpy as np
import pytest

from core import zoo
from core.example_data import record_path, write_example_data
from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_predict import _run_data
from tests.cli.test_run_commands import ME, cli_env, flowtrain

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]


def small_text_spec() -> dict[str, Any]:
    """The zoo's lstm_text_classifier, its sizes cut down for a CPU minute, one epoch."""
    doc = zoo.template("lstm_text_classifier").model_dump(mode="json")
    doc["data"].update(batch_size=32, num_workers=0)
    doc["data"]["preprocessing"][0].update(vocab_size=500, max_length=32)
    for node in doc["model"]["nodes"]:
        if node["op"] == "Embedding":
            node["params"].update(num_embeddings=500, embedding_dim=16)
        elif node["op"] == "LSTM":
            node["params"]["hidden_size"] = 16
    doc["training"].update(epochs=1, log_every_steps=2,
                           resources={"nodes": 1, "gpus_per_node": 0, "cpus_per_task": 1})
    return doc


@pytest.fixture(scope="module")
def text_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed torch run of :func:`small_text_spec` on the example reviews (300 texts, 2 classes)."""
    tmp = tmp_path_factory.mktemp("predict_text")
    home = tmp / "home"
    env = cli_env(home, tmp)
    doc = small_text_spec()
    write_example_data(zoo.template("lstm_text_classifier"), tmp, record=record_path(home, ME))
    (tmp / "spec.json").write_text(json.dumps(doc))
    out = flowtrain(env, "run", str(tmp / "spec.json"), "--scheduler", "local", "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    registry = RunRegistry(home=home)
    [run] = registry.list_runs(ME)
    assert run.state == RunState.COMPLETED and (run.run_dir / "model.onnx").is_file(), registry.history(run.id)
    return {"env": env, "tmp": tmp, "run": registry.get(run.id), "result": registry.result(run.id)}


def _refused(text_run: dict[str, Any], *args: str) -> str:
    done = flowtrain(text_run["env"], "predict", text_run["run"].id, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: ")
    return done.stderr


def test_validation_texts_as_lines_reproduce_the_reported_accuracy(text_run: dict[str, Any]) -> None:
    run, tmp = text_run["run"], text_run["tmp"]
    with open(tmp / "text" / "reviews.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    val = _run_data(run).split_indices(len(rows))["val"]
    (tmp / "val.txt").write_text("".join(rows[i]["text"] + "\n" for i in val), encoding="utf-8")
    done = flowtrain(text_run["env"], "predict", run.id, str(tmp / "val.txt"), "--top", "2", "--batch", "8",
                     "--out", str(tmp / "val.jsonl"))
    assert done.returncode == 0, done.stderr
    assert "statistics of tokenize (step 1) recomputed from the training split" in done.stdout  # the vocabulary
    records = [json.loads(line) for line in (tmp / "val.jsonl").read_text().splitlines()]
    assert [r["input"] for r in records] == [f"{tmp / 'val.txt'} line {n}" for n in range(1, len(val) + 1)]
    assert len(records) == len(val) == 30 and {r["class"] for r in records} <= {"class0", "class1"}
    accuracy = np.mean([r["class"] == rows[i]["label"] for r, i in zip(records, val, strict=True)])
    assert accuracy == pytest.approx(text_run["result"]["val_accuracy"], abs=1e-6)

    with open(tmp / "val.csv", "w", newline="", encoding="utf-8") as f:  # the text column by name, others ignored
        writer = csv.writer(f)
        writer.writerow(["id", "text"])
        writer.writerows([[i, rows[i]["text"]] for i in val])
    as_csv = flowtrain(text_run["env"], "predict", run.id, str(tmp / "val.csv"), "--top", "2",
                       "--out", str(tmp / "csv.jsonl"))
    assert as_csv.returncode == 0, as_csv.stderr
    from_csv = [json.loads(line) for line in (tmp / "csv.jsonl").read_text().splitlines()]
    assert from_csv[0]["input"] == f"{tmp / 'val.csv'} line 2"
    assert [r["top"] for r in from_csv] == [r["top"] for r in records]

    table = flowtrain(text_run["env"], "predict", run.id, str(tmp / "val.txt"), "--framework", "torch", "--top", "1")
    assert table.returncode == 0, table.stderr
    first = table.stdout.splitlines()[0]
    assert "through torch's model/model." in first and "the same top-1 class on 30 of 30 samples" in first
    assert float(first.split("largest output difference from model.onnx: ")[1].split(";")[0]) <= 1e-4
    assert [line.split()[-2] for line in table.stdout.splitlines()[2:]] == [r["class"] for r in records]


def test_an_empty_line_a_file_that_is_not_text_or_a_csv_without_the_text_column_is_refused(text_run: dict[str, Any]) -> None:
    tmp = text_run["tmp"]
    (tmp / "gap.txt").write_text("a fine review\n\nanother one\n", encoding="utf-8")
    assert f"{tmp / 'gap.txt'} line 2: an empty line; give one text per line" in _refused(text_run, str(tmp / "gap.txt"))
    (tmp / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert f"{tmp / 'photo.txt'} line 1: not UTF-8 text" in _refused(text_run, str(tmp / "photo.txt"))
    (tmp / "nul.txt").write_bytes(b"text\x00with a NUL byte\n")
    assert f"{tmp / 'nul.txt'}: not a text file (it holds NUL bytes)" in _refused(text_run, str(tmp / "nul.txt"))
    (tmp / "empty.txt").write_bytes(b"")
    assert f"{tmp / 'empty.txt'}: the file holds no text" in _refused(text_run, str(tmp / "empty.txt"))
    (tmp / "untitled.csv").write_text("review,label\ngood,class0\n", encoding="utf-8")
    assert f"{tmp / 'untitled.csv'}: no text column 'text'; the columns are ['review', 'label']" in _refused(
        text_run, str(tmp / "untitled.csv"))
    (tmp / "scan.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    message = _refused(text_run, str(tmp / "scan.png"))
    assert f"trained on the texts of {tmp / 'text' / 'reviews.csv'}, not on image files; give its inputs as a .txt " \
           "file, one text per line" in message
