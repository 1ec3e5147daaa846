"""The language models of the zoo: gpt_mini trains a few steps from its example text in every framework,
its validation loss (next-token cross-entropy) already below a uniform guess over the 256 byte values, and
``python -m flowtrain sample`` generates from each finished run (GPT-2 small is validated and counted only:
tests/core/test_zoo.py; gpt_mini's equivalence: tests/frameworks/test_equivalence.py).

gpt_mini is trained for three steps from its example text (read byte by byte) once per framework, by the
real generated program through ``flowtrain run --scheduler local``; each completes with its
``model.onnx``. The run's own framework (its saved model, in the model worker) and onnxruntime must then
generate the same ids for the same command; sampling with a seed repeats; errors are one message with
every problem and exit code 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from cli.terminal import terminal_text
from core import zoo
from core.example_data import write_example_data
from core.mapping.base import FRAMEWORKS
from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, cli_env, flowtrain, small_spec

pytestmark = pytest.mark.frameworks

PROMPT = "The cat"


@pytest.fixture(scope="module")
def lm_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed gpt_mini run (3 steps) per framework, named ``lm-<framework>``, in one home."""
    tmp = tmp_path_factory.mktemp("sample")
    home = tmp / "home"
    env = cli_env(home, tmp)
    write_example_data(zoo.template("gpt_mini"), tmp / "data", record=tmp / "record.json", samples=40)
    registry = RunRegistry(home=home)
    runs = {}
    for framework in FRAMEWORKS:
        doc = zoo.template("gpt_mini").model_dump(mode="json")
        doc["name"] = f"lm-{framework}"
        doc["data"].update(source=str(tmp / "data" / "text" / "corpus.txt"), batch_size=8, num_workers=0)
        doc["training"].update(epochs=1, samples_per_epoch=24, log_every_steps=1)
        doc["training"]["resources"]["cpus_per_task"] = 1
        spec = tmp / f"{framework}.json"
        spec.write_text(json.dumps(doc))
        out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait", "--max-steps", "3",
                        "--framework", framework)
        assert out.returncode == 0, out.stdout + out.stderr
        [run] = [r for r in registry.list_runs(ME) if r.framework == framework]
        assert run.state == RunState.COMPLETED and (run.run_dir / "model.onnx").is_file(), registry.history(run.id)
        runs[framework] = run
    return {"env": env, "tmp": tmp, "home": home, "runs": runs}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gpt_mini_trains_a_few_steps_from_its_example_text(framework: str, lm_runs: dict[str, Any]) -> None:
    run = lm_runs["runs"][framework]
    summary = json.loads((run.run_dir / "result.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3, summary
    assert math.isfinite(summary["val_loss"]) and summary["val_loss"] < math.log(256), summary  # perplexity < 256
    # a language model's metrics: token accuracy and perplexity = exp(loss), never regression's mse/mae
    assert summary["val_perplexity"] == pytest.approx(math.exp(summary["val_loss"]), rel=1e-9), summary
    assert 0.0 <= summary["val_accuracy"] <= 1.0 and "val_mse" not in summary, summary
    records = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["event"] in ("train", "epoch") and r.get("split", "train") == "train"]
    assert trained and all(r["perplexity"] == pytest.approx(math.exp(r["loss"]), rel=1e-9) for r in trained), trained


def _sample(lm_runs: dict[str, Any], *args: str) -> dict[str, Any]:
    done = flowtrain(lm_runs["env"], "sample", *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_run_s_framework_and_onnx_generate_the_same_ids(lm_runs: dict[str, Any], framework: str) -> None:
    name = f"lm-{framework}"
    greedy = _sample(lm_runs, name, "--text", PROMPT, "--tokens", "12", "--framework", framework)
    assert greedy["through"] == f"{framework}'s {_saved(framework)} (model.onnx gives the same 12 token(s))"
    onnx = _sample(lm_runs, name, "--text", PROMPT, "--tokens", "12")
    assert onnx["through"] == "model.onnx" and onnx["ids"] == greedy["ids"] and len(greedy["ids"]) == 12
    assert greedy["prompt"] == list(PROMPT.encode()) and greedy["text"].startswith(PROMPT)
    assert all(0 <= i < 256 for i in greedy["ids"])


def _saved(framework: str) -> str:
    return {"torch": "model/model.pt", "keras": "model/model.keras", "paddle": "model/model.pdparams"}[framework]


def test_sampling_with_a_seed_repeats(lm_runs: dict[str, Any]) -> None:
    args = ("lm-torch", "--prompt-ids", "84,104,101", "--tokens", "24", "--temperature", "1.5", "--top-k", "50")
    first = _sample(lm_runs, *args)  # a fresh seed, printed so that the output can be repeated
    assert first["temperature"] == 1.5 and first["top_k"] == 50 and isinstance(first["seed"], int)
    assert _sample(lm_runs, *args, "--seed", str(first["seed"]))["ids"] == first["ids"]
    assert _sample(lm_runs, *args, "--seed", str(first["seed"] + 1))["ids"] != first["ids"]  # 24 draws among 50


def test_the_text_a_user_sees_and_a_context_cropped_to_the_block(lm_runs: dict[str, Any]) -> None:
    # gpt_mini reads 64 tokens: a longer prompt keeps its last 64, so what comes before them changes nothing
    tail = [(7 * i + 65) % 128 for i in range(64)]
    done = flowtrain(lm_runs["env"], "sample", "lm-torch", "--prompt-ids", ",".join(map(str, [1, 2, 3, *tail])),
                     "--tokens", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    run = lm_runs["runs"]["torch"]
    assert lines[0] == (f"run {run.id} (lm-torch): 3 token(s) after a prompt of 67, greedy, through model.onnx; "
                        "the context is cropped to its last 64 tokens")
    assert lines[1] == "prompt ids: " + " ".join(map(str, [1, 2, 3, *tail])) and lines[2].startswith("new ids:    ")
    new = [int(i) for i in lines[2].split()[2:]]
    text = done.stdout.split("\ntext:       ", 1)[1]  # control characters made visible
    assert len(new) == 3 and text == terminal_text(bytes([1, 2, 3, *tail, *new]).decode(errors="replace")) + "\n"
    assert text.startswith("\\x01\\x02\\x03")
    assert _sample(lm_runs, "lm-torch", "--prompt-ids", ",".join(map(str, tail)), "--tokens", "3")["ids"] == new


def _refused(lm_runs: dict[str, Any], *args: str) -> str:
    done = flowtrain(lm_runs["env"], "sample", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: ") and not done.stdout
    return done.stderr


def test_bad_requests_are_refused_with_every_problem_at_once(lm_runs: dict[str, Any]) -> None:
    message = _refused(lm_runs, "lm-torch", "--prompt-ids", "1,300,-2", "--tokens", "0", "--temperature", "-1")
    assert message.startswith("error: 3 problem(s) with this sample command:"), message
    assert "--tokens: nothing to generate; received 0; expected a whole number of at least 1" in message
    assert "--temperature: not a temperature; received -1.0" in message
    assert ("--prompt-ids: token ids outside the run's vocabulary; received 300, -2; expected ids 0 … 255 "
            "(data.vocab_size 256)") in message
    assert "received 'x'" in _refused(lm_runs, "lm-torch", "--prompt-ids", "1,x", "--tokens", "2")
    message = _refused(lm_runs, "lm-torch", "--text", "hi", "--tokens", "2", "--framework", "keras")
    assert "  - --framework keras: run " in message and "was trained with torch, so only --framework torch" in message


def test_a_failed_run_and_a_run_that_is_not_a_language_model_are_refused(lm_runs: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    registry = RunRegistry(home=lm_runs["home"])
    model = lm_runs["runs"]["torch"]
    failed = registry.create_run(user=ME, spec_json=registry.get(model.id, ME).spec_json or "",
                                 spec_hash=model.spec_hash, framework="torch", scheduler="local", name="lm-broken")
    registry.mark_failed(failed.id, "the job could not be submitted")
    message = _refused(lm_runs, "lm-broken", "--text", "hi", "--tokens", "2")
    assert f"RUN: run {failed.id} (lm-broken) is FAILED: the job could not be submitted" in message
    digits = small_spec(tmp_path).read_text()
    classifier = registry.create_run(user=ME, spec_json=digits, spec_hash="digits", framework="torch",
                                     scheduler="local", name="digits")
    message = _refused(lm_runs, "digits", "--prompt-ids", "1,2", "--tokens", "2")
    assert f"RUN: run {classifier.id} (digits) is not a language model; received data.task classification" in message
    assert f"`python -m flowtrain predict {classifier.id} INPUT…`" in message
