"""``python -m flowtrain import-onnx``, run as a user runs it: a published model becomes a spec plus its
weights next to it; a model that cannot be imported is refused with every problem, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

from core.load import load_spec
from core.onnx_import import import_onnx
from core.validate import validate
from core.weights import canonical_shapes
from tests.onnx_models import gemm_model, published, with_external_weight, with_random_weights

ROOT = Path(__file__).resolve().parents[2]


def flowtrain(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_import_writes_the_spec_and_its_weights_next_to_it(tmp_path: Path) -> None:
    model = with_random_weights(onnx.load(published("squeezenet")))
    onnx.save(model, str(tmp_path / "squeezenet.onnx"))
    proc = flowtrain(tmp_path, "import-onnx", "squeezenet.onnx", "--out", "specs/sq.json")
    assert proc.returncode == 0, proc.stderr
    assert "Softmax" in proc.stdout  # the note on the dropped softmax
    spec = load_spec(tmp_path / "specs" / "sq.json")
    assert spec.name == "squeezenet" and spec.training.init_weights == "sq.weights.npz"
    with np.load(tmp_path / "specs" / "sq.weights.npz") as arrays:
        saved = dict(arrays)
    assert {k: v.shape for k, v in saved.items()} == canonical_shapes(validate(spec))
    expected = import_onnx(model).weights
    assert all(np.array_equal(saved[k], expected[k]) for k in expected)
    generated = flowtrain(tmp_path, "generate", "specs/sq.json", "--framework", "torch", "--out", "prog")
    assert generated.returncode == 0, generated.stderr
    train = (tmp_path / "prog" / "train.py").read_text(encoding="utf-8")
    # found wherever it runs: the absolute path, as a string literal (double-quoted: the program is ruff-formatted)
    assert f'"{(tmp_path / "specs" / "sq.weights.npz").resolve()}"' in train


def test_an_unsupported_model_is_refused_with_its_problems(tmp_path: Path) -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Erf", ["x"], ["y"], name="gate")], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, str(tmp_path / "erf.onnx"))
    proc = flowtrain(tmp_path, "import-onnx", "erf.onnx")
    assert proc.returncode == 2
    assert "onnx.nodes[gate]: Erf (opset 13)" in proc.stderr and "Gemm" in proc.stderr
    assert not (tmp_path / "erf.json").exists()
    missing = flowtrain(tmp_path, "import-onnx", "nothing.onnx")
    assert missing.returncode == 2 and "no such ONNX file" in missing.stderr


def test_the_models_own_text_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """An op type or node name with escape sequences (retitle the window, clear the screen) is
    printed with its control characters made visible."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Erf\x1b]2;owned\x07", ["x"], ["y"], name="gate\x1b[2J\u202e")], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, str(tmp_path / "esc.onnx"))
    proc = flowtrain(tmp_path, "import-onnx", "esc.onnx")
    assert proc.returncode == 2
    assert not any(c in proc.stderr for c in "\x1b\x07\u202e"), repr(proc.stderr[:300])
    assert "onnx.nodes[gate\\x1b[2J\\u202e]: Erf\\x1b]2;owned\\x07 (opset 13)" in proc.stderr


def test_external_data_is_read_from_the_models_folder_only(tmp_path: Path) -> None:
    """The command runs in ``tmp_path`` (its working folder, holding a secret); the models lie in
    ``models/``: a location naming the working folder's file, or leaving the model's folder, is refused."""
    (tmp_path / "secret.db").write_bytes(b"someone else's registry 0123456789abcdef")
    models = tmp_path / "models"
    models.mkdir()
    (models / "link.bin").symlink_to(tmp_path / "secret.db")
    for location in ("secret.db", "../secret.db", "link.bin"):
        onnx.save(with_external_weight(gemm_model(), location), str(models / "thief.onnx"))
        proc = flowtrain(tmp_path, "import-onnx", "models/thief.onnx", "--out", "thief.json")
        assert proc.returncode == 2, (location, proc.stdout)
        assert "onnx.initializers[w]" in proc.stderr and repr(location) in proc.stderr, proc.stderr
        assert not (tmp_path / "thief.json").exists() and not (tmp_path / "thief.weights.npz").exists()
    weight = np.arange(8, dtype=np.float32).reshape(2, 4)
    onnx.save_model(gemm_model(weight), str(models / "fc.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="fc.data", size_threshold=0)
    proc = flowtrain(tmp_path, "import-onnx", "models/fc.onnx", "--out", "fc.json")
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "fc.weights.npz") as saved:
        assert [a.tolist() for a in saved.values()] == [weight.tolist()]


def test_a_weight_whose_data_does_not_fit_its_dims_exits_2_naming_it(tmp_path: Path) -> None:
    model = gemm_model()
    model.graph.initializer[0].dims[:] = [3, 4]  # 8 numbers declared as 12
    onnx.save(model, str(tmp_path / "bad.onnx"))
    proc = flowtrain(tmp_path, "import-onnx", "bad.onnx")
    assert proc.returncode == 2 and "onnx.initializers[w]: cannot be read" in proc.stderr
