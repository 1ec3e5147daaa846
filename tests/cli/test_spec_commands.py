"""The command-line contract of the core commands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def flowtrain(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def write(tmp_path: Path, doc: Any, name: str = "spec.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


def template(name: str) -> dict[str, Any]:
    return json.loads(flowtrain("zoo", name, check=True).stdout)


def test_schema_is_json_schema() -> None:
    schema = json.loads(flowtrain("schema", check=True).stdout)
    assert schema["type"] == "object" and "model" in schema["properties"]


def test_zoo_lists_the_pipelines() -> None:
    out = flowtrain("zoo", check=True).stdout
    for name in ("mlp", "mnist_cnn", "resnet50", "transformer_text_classifier"):
        assert name in out


def test_the_old_names_of_zoo_still_work_and_say_the_new_one() -> None:
    """`templates`/`template NAME` print what `zoo`/`zoo NAME` print, plus one line on stderr."""
    for old, new in ((["templates"], ["zoo"]), (["templates", "--json"], ["zoo", "--json"]),
                     (["template", "mlp"], ["zoo", "mlp"])):
        was, now = flowtrain(*old, check=True), flowtrain(*new, check=True)
        assert was.stdout == now.stdout and now.stderr == ""
        assert was.stderr.splitlines() == [f"note: `flowtrain {old[0]}{' NAME' if old[0] == 'template' else ''}` "
                                           f"is now `flowtrain zoo{' NAME' if old[0] == 'template' else ''}`"]


@pytest.mark.parametrize("name, params", [
    ("resnet18", 11_689_512), ("resnet50", 25_557_032), ("vgg16", 138_357_544),
    ("mobilenet_v2", 3_504_872), ("alexnet", 61_100_840),
])
def test_summary_reports_torchvision_parameter_counts(tmp_path: Path, name: str, params: int) -> None:
    path = write(tmp_path, template(name))
    summary = json.loads(flowtrain("summary", path, "--json", check=True).stdout)
    assert summary["params"] == params
    assert summary["params"] == sum(layer["params"] for layer in summary["layers"])
    first = summary["layers"][0]
    assert first == {"id": "input", "op": "Input", "output_shape": [3, 224, 224], "dtype": "float32",
                     "params": 0, "macs": 0, "inputs": []}
    text = flowtrain("summary", path, check=True).stdout
    assert f"{params:,} parameters" in text


def test_validate_ok(tmp_path: Path) -> None:
    proc = flowtrain("validate", write(tmp_path, template("mnist_cnn")), check=True)
    assert "valid" in proc.stdout


def test_starting_weights_that_no_longer_fit_exit_2_naming_the_node(tmp_path: Path) -> None:
    import numpy as np

    from core.load import spec_from_json
    from core.validate import validate
    from core.weights import random_canonical

    doc = template("mnist_cnn")
    given = random_canonical(validate(spec_from_json(json.dumps(doc))))
    head = next(k for k in reversed(given) if k.endswith("/weight"))
    np.savez(tmp_path / "w.npz", **{**given, head: np.zeros((2, 2), np.float32)})
    doc["training"]["init_weights"] = "w.npz"  # next to the spec
    proc = flowtrain("validate", write(tmp_path, doc))
    assert proc.returncode == 2 and f"do not fit 1 node(s): {head.split('/')[0]}" in proc.stderr


def test_cyclic_spec_exits_2_naming_the_nodes(tmp_path: Path) -> None:
    doc = template("mnist_cnn")
    doc["model"]["edges"].append({"source": "relu2", "target": "conv2d2"})
    proc = flowtrain("validate", write(tmp_path, doc))
    assert proc.returncode == 2
    assert "conv2d2" in proc.stderr and "relu2" in proc.stderr and "cycle" in proc.stderr
    js = json.loads(flowtrain("validate", write(tmp_path, doc), "--json").stdout)
    assert {p["node"] for p in js["problems"]} == {"conv2d2", "relu2"}


def test_misshaped_spec_exits_2_naming_the_node(tmp_path: Path) -> None:
    doc = template("mnist_cnn")
    next(n for n in doc["model"]["nodes"] if n["id"] == "conv2d2")["params"]["kernel_size"] = 30
    proc = flowtrain("summary", write(tmp_path, doc))
    assert proc.returncode == 2 and "conv2d2" in proc.stderr


@pytest.mark.parametrize("content", ["{not json", "[]", '{"model": {"nodes": 5}}', ""])
def test_malformed_files_exit_2_with_a_message(tmp_path: Path, content: str) -> None:
    proc = flowtrain("validate", write(tmp_path, content))
    assert proc.returncode == 2 and proc.stderr.startswith("error:")


def test_a_5001_digit_integer_and_a_keyword_block_parameter_exit_2_naming_the_field(tmp_path: Path) -> None:
    doc = template("mnist_cnn")
    doc["data"]["batch_size"] = 12345
    proc = flowtrain("validate", write(tmp_path, json.dumps(doc).replace("12345", "9" * 5001)))
    assert proc.returncode == 2 and "data.batch_size: is an integer of 5,001 digits" in proc.stderr
    blocks = json.dumps(template("resnet18_cifar")).replace('"channels"', '"None"')
    proc = flowtrain("validate", write(tmp_path, blocks))
    assert proc.returncode == 2 and "model.blocks[basic_block].params[0].name" in proc.stderr
    assert "'None' is a Python keyword" in proc.stderr


def test_missing_file_and_unknown_template() -> None:
    proc = flowtrain("validate", "/nonexistent/spec.json")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = flowtrain("zoo", "resnet1000")
    assert proc.returncode == 2 and "resnet18" in proc.stderr


def test_generate_writes_the_program_the_job_script_and_the_manifest(tmp_path: Path) -> None:
    out = tmp_path / "prog"
    flowtrain("generate", str(ROOT / "examples" / "digits_cnn.json"), "--framework", "torch", "--out", str(out),
              check=True)
    assert {"train.py", "model.py", "data.py", "runtime.py", "spec.json", "manifest.json", "job.sbatch"} <= {
        p.name for p in out.iterdir()}
    sbatch = (out / "job.sbatch").read_text()
    assert "#SBATCH --requeue" in sbatch and f"#SBATCH --chdir={out.resolve()}" in sbatch
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["framework"] == "torch" and "train.py" in manifest["files"]
    subprocess.run(["bash", "-n", str(out / "job.sbatch")], check=True)
