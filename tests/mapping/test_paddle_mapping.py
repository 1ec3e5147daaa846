"""The PaddlePaddle mapper and its templates: weight transforms, the generated program compiles and
passes ``ruff check``, and (with paddle and torch installed) an equivalence check against torch for
every case of the op catalogue (tests/op_cases.py), each framework in its own subprocess. (That
every op has a converter and every case maps and binds its weights:
tests/mapping/test_op_catalogue.py; golden files: tests/test_golden.py.)
"""

from __future__ import annotations

import ast
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from core.codegen import generate
from core.load import load_spec
from core.mapping.base import MappedLayer
from core.mapping.paddle import LAYER_ATTRIBUTES, layer_names, map_model, tensor_names
from core.validate import validate
from tests import op_cases
from tests.mapping.paddle_cases import run_equivalence

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
RUFF = Path(sys.executable).with_name("ruff")  # the binary itself: no Python start-up per check


def ruff(folder: Path) -> subprocess.CompletedProcess[str]:
    """``ruff check`` with its default rules at the programs' line length (120, as core/codegen.py formats them), run in the program's folder as its user would
    (so that data.py and model.py count as first-party imports)."""
    return subprocess.run([RUFF, "check", "--isolated", "--no-cache", "--line-length", "120", "."],
                          capture_output=True, text=True, cwd=folder)


def write_program(spec: object, folder: Path) -> Path:
    generate(spec, "paddle").write(folder)
    return folder


# ------------------------------------------------------------------------------------------ mapping (no frameworks)


def mapped_node(case: str) -> MappedLayer:
    """The layer of the case's op (node id ``node``)."""
    return next(layer for layer in map_model(validate(op_cases.BY_NAME[case].spec())).layers
                if layer.node_id == "node")


def test_attention_weights_split_into_q_k_v_and_linear_weights_transpose() -> None:
    bindings = {(b.canonical, b.target): b.transform for b in mapped_node("TransformerEncoderLayer").weights}
    assert bindings[("node/self_attn.in_proj_weight", "node.self_attn.k_proj.weight")] == "k_transpose"
    assert bindings[("node/self_attn.in_proj_bias", "node.self_attn.v_proj.bias")] == "v"
    assert bindings[("node/linear1.weight", "node.linear1.weight")] == "transpose"
    assert bindings[("node/norm2.bias", "node.norm2.bias")] == "identity"


def test_batch_norm_momentum_is_converted_and_statistics_renamed() -> None:
    layer = mapped_node("BatchNorm2d-momentum")
    assert layer.ctor == "UnbiasedBatchNorm2D(3, momentum=0.8, epsilon=0.001)"
    assert {b.canonical: b.target for b in layer.weights} == {
        "node/weight": "node.weight", "node/bias": "node.bias",
        "node/running_mean": "node._mean", "node/running_var": "node._variance"}


def test_ceil_mode_pooling_slices_the_window_torch_drops() -> None:
    layer = mapped_node("MaxPool2d-padded-ceil")
    assert layer.ctor == "nn.MaxPool2D(kernel_size=2, stride=2, padding=1, ceil_mode=True, return_mask=True)"
    # the pooled values ([0]; the mask is dropped), less the 4th row paddle keeps that starts in the padding
    assert layer.forward.endswith("[0][:, :, :3, :4]")


def test_dilated_same_convolution_gets_explicit_padding() -> None:
    assert "padding=2" in mapped_node("Conv2d-same-dilated").ctor  # paddle's "same" would ignore the dilation
    assert "padding='same'" in mapped_node("Conv2d-same-stride2-rect").ctor


def test_generated_names_avoid_layer_attributes_keywords_and_collisions() -> None:
    nodes = [{"id": "input", "op": "Input", "params": {"shape": [4]}},
             {"id": "train", "op": "Linear", "params": {"out_features": 4}},
             {"id": "parameters", "op": "Linear", "params": {"out_features": 4}},
             {"id": "class", "op": "ReLU"},
             {"id": "a.b", "op": "Linear", "params": {"out_features": 4}},
             {"id": "a_b", "op": "Linear", "params": {"out_features": 4}},
             {"id": "3x", "op": "Add"},
             {"id": "output", "op": "Output"}]
    edges = [{"source": "input", "target": "train"}, {"source": "train", "target": "parameters"},
             {"source": "parameters", "target": "class"}, {"source": "class", "target": "a.b"},
             {"source": "class", "target": "a_b"}, {"source": "a.b", "target": "3x", "port": 0},
             {"source": "a_b", "target": "3x", "port": 1}, {"source": "3x", "target": "output"}]
    spec = load_spec_dict({"name": "names", "data": {"source": "d.npz", "task": "regression", "input_shape": [4]},
                           "model": {"nodes": nodes, "edges": edges}, "training": {"loss": "mse"}})
    analysis = validate(spec)
    names = layer_names(analysis)
    assert names["train"] == "train_" and names["parameters"] == "parameters_" and names["class"] == "class_"
    assert names["a.b"] == "a_b" and names["a_b"] == "a_b_2" and names["3x"] == "node_3x"
    assert not set(names.values()) & LAYER_ATTRIBUTES
    tensors = tensor_names(analysis)
    assert tensors["train"] == tensors["parameters"] == tensors["class"] == "x"  # a chain keeps one name
    assert len({tensors["a.b"], tensors["a_b"], tensors["3x"]}) == 3


def load_spec_dict(doc: dict) -> object:
    from core.load import spec_from_dict

    return spec_from_dict(doc)


def test_generated_programs_compile_and_pass_ruff(tmp_path: Path) -> None:
    specs = {f"zoo_{e.name}": e.build() for e in zoo.entries()}
    specs["example_digits_cnn"] = load_spec(ROOT / "examples" / "digits_cnn.json")
    variants = {"sgd_step_clip_es": {"optimizer": {"name": "sgd", "momentum": 0.9, "nesterov": True,
                                                   "weight_decay": 5e-4},
                                     "schedule": {"name": "step"}, "gradient_clip_norm": 1.0,
                                     "early_stopping": {"patience": 2, "monitor": "val_accuracy"}},
                "adam_plateau": {"optimizer": {"name": "adam", "weight_decay": 1e-4}, "schedule": {"name": "plateau"},
                                 "label_smoothing": 0.1, "checkpoint": {"every_steps": None}},
                "sgd_plain_warmup": {"optimizer": {"name": "sgd", "momentum": 0.0}, "schedule": {"name": "warmup_cosine"},
                                     "early_stopping": {"patience": 3}},
                "constant_bce": {"schedule": {"name": "constant"}, "loss": "bce_with_logits"}}
    base = zoo.template("mnist_cnn").model_dump(mode="json")
    for name, training in variants.items():
        doc = {**base, "training": {**base["training"], **training}}
        if name == "adam_plateau":
            doc["data"] = {**base["data"], "augmentation": [
                {"op": "random_crop", "padding": 2}, {"op": "horizontal_flip"}, {"op": "rotation"},
                {"op": "color_jitter"}, {"op": "gaussian_noise"}]}
        specs[f"variant_{name}"] = load_spec_dict(doc)
    specs.update({f"case_{k}": v for k, v in op_cases.specs().items()})
    for name, spec in specs.items():
        folder = write_program(spec, tmp_path / name)
        for path in folder.glob("*.py"):
            py_compile.compile(str(path), doraise=True)
        result = ruff(folder)
        assert result.returncode == 0, f"{name}:\n{result.stdout}{result.stderr}"


def test_user_text_reaches_the_code_only_as_string_constants(tmp_path: Path) -> None:
    hostile = "x'''\"\"\"\\n\u2028{{ 7*7 }}{% raw %}__import__('os').system('touch /tmp/pwned')"
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    doc["name"] = hostile[:200]
    doc["description"] = hostile
    folder = write_program(load_spec_dict(doc), tmp_path / "hostile")
    for name in ("model.py", "train.py", "runtime.py"):
        tree = ast.parse((folder / name).read_text(encoding="utf-8"))
        calls = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        assert "__import__" not in calls and not any("system" in c for c in calls), name
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if name != "train.py":  # train.py imports PIPELINE from runtime.py
            assert any(hostile[:200] in s for s in strings), f"the name should appear as a string constant in {name}"


# ------------------------------------------------------------------------------------------ with paddle installed


@pytest.mark.frameworks
def test_layer_attribute_list_covers_installed_paddle() -> None:
    code = ("import warnings; warnings.filterwarnings('ignore'); import paddle; "
            "print(' '.join(sorted(n for n in set(dir(paddle.nn.Layer)) | set(vars(paddle.nn.Layer())) "
            "if not n.startswith('_'))))")
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GLOG_minloglevel": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    installed = set(proc.stdout.split())
    assert installed <= LAYER_ATTRIBUTES, f"add to LAYER_ATTRIBUTES: {sorted(installed - LAYER_ATTRIBUTES)}"


@pytest.mark.frameworks
def test_every_one_op_graph_matches_torch(tmp_path: Path) -> None:
    """Same canonical weights, same inputs: paddle's eval-mode output equals torch's within 1e-5, the
    canonical weights round-trip exactly, and two training-mode passes move BatchNorm's running
    statistics the same way (paddle's biased running variance is corrected to torch's unbiased one)."""
    cases = op_cases.specs()
    report = run_equivalence(cases, tmp_path)
    assert set(report) == set(cases)
    bad = {name: entry for name, entry in report.items()
           if "error" in entry or entry["max_abs_diff"] > 1e-5 or entry["roundtrip"] != 0.0
           or entry["after_train_diff"] > 1e-5}
    assert bad == {}, bad
