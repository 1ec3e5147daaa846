"""The PyTorch mapper and templates: weights bind to the state dict, the generated code is clean, names
are safe. (That every op has a converter and every case maps: tests/mapping/test_op_catalogue.py.)

Golden files of the generated programs are checked in tests/test_golden.py.
"""

from __future__ import annotations

import ast
import keyword
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from core.block_expansion import expand
from core.codegen import generate
from core.errors import SpecError
from core.mapping.torch import MODULE_ATTRIBUTES, layer_names, map_model, tensor_names
from core.mapping.torch.conv import same_padding
from core.spec import PipelineSpec
from core.validate import validate
from tests import op_cases

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
RUFF = Path(sys.executable).with_name("ruff")  # the binary itself: no Python start-up per check
ONE_OP = op_cases.specs()


def ruff(folder: Path, files: tuple[str, ...] = ("model.py", "train.py", "runtime.py")) -> subprocess.CompletedProcess[str]:
    """``ruff check`` with its default rules at the programs' line length (120, as core/codegen.py formats them), run in the generated folder as a user would (there
    data.py, model.py and runtime.py are first-party modules for the import sorting rule)."""
    return subprocess.run([RUFF, "check", "--isolated", "--no-cache", "--line-length", "120", *files],
                          capture_output=True, text=True, cwd=folder, check=False)


def with_training(spec: PipelineSpec, data: dict | None = None, **training: object) -> PipelineSpec:
    doc = spec.model_dump(mode="json")
    doc["training"].update(training)
    doc["data"].update(data or {})
    return PipelineSpec.model_validate(doc)


# ------------------------------------------------------------------------------------------ mapping


@pytest.mark.parametrize("name", sorted(ONE_OP))
def test_every_canonical_weight_binds_to_the_state_dict_key_of_the_same_name(name: str) -> None:
    analysis = validate(ONE_OP[name])
    for layer in map_model(analysis).layers:
        for binding in layer.weights:
            node, _, leaf = binding.canonical.partition("/")
            assert (binding.target, binding.transform) == (f"{layer_names(analysis)[node]}.{leaf}", "identity")


@pytest.mark.parametrize(("size", "k", "s", "d", "expected"), [
    (8, 3, 2, 1, (0, 1)),  # TF rule: the odd pixel goes at the end
    (9, 3, 2, 1, (1, 1)),
    (7, 4, 1, 1, (1, 2)),
    (10, 1, 2, 1, (0, 0)),
    (5, 3, 1, 2, (2, 2)),
])
def test_same_padding_follows_the_tensorflow_rule(size: int, k: int, s: int, d: int,
                                                   expected: tuple[int, int]) -> None:
    assert same_padding(size, k, s, d) == expected
    before, after = expected
    assert (size + before + after - d * (k - 1) - 1) // s + 1 == -(-size // s)


def test_strided_same_convolution_pads_explicitly() -> None:
    analysis = validate(ONE_OP["Conv2d-same-stride2"])
    conv = next(layer for layer in map_model(analysis).layers if layer.op == "Conv2d")
    assert conv.forward == "self.node(F.pad(x, (0, 1, 0, 1)))"
    assert "padding" not in conv.ctor


# ------------------------------------------------------------------------------------------ names


def hostile_ids_spec() -> PipelineSpec:
    """Node ids that collide with Python keywords, torch names and nn.Module attributes."""
    ids = ["x", "forward", "F", "1lin", "a-b", "a_b", "class", "self", "training", "_hidden", "torch", "output"]
    ops = ["Input", "Linear", "ReLU", "Linear", "Tanh", "Sigmoid", "Add", "Linear", "Dropout", "Linear",
           "ReLU", "Output"]
    params = {"forward": {"out_features": 8}, "1lin": {"out_features": 8}, "self": {"out_features": 8},
              "_hidden": {"out_features": 4}}
    nodes = [{"id": i, "op": op, "params": params.get(i, {})} for i, op in zip(ids, ops)]
    edges = [("x", "forward"), ("forward", "F"), ("F", "1lin"), ("1lin", "a-b"), ("1lin", "a_b"),
             ("a-b", "class"), ("a_b", "class"), ("class", "self"), ("self", "training"), ("training", "_hidden"),
             ("_hidden", "torch"), ("torch", "output")]
    edge_docs = [{"source": a, "target": b, **({"port": 0 if a == "a-b" else 1} if b == "class" else {})}
                 for a, b in edges]
    return PipelineSpec.model_validate({
        "name": "hostile ids", "data": {"source": "x.npz", "format": "npz", "task": "regression", "input_shape": [6]},
        "model": {"nodes": nodes, "edges": edge_docs}, "training": {"loss": "mse"}})


def test_generated_names_are_safe_unique_identifiers() -> None:
    analysis = validate(hostile_ids_spec())
    layers = layer_names(analysis)
    assert len(set(layers.values())) == len(layers)
    for name in layers.values():
        assert name.isidentifier() and not keyword.iskeyword(name)
        assert name not in MODULE_ATTRIBUTES and name not in {"F", "torch", "nn"} and not name.startswith("_")
    tensors = tensor_names(analysis)
    assert tensors["x"] == "x"
    for name in set(tensors.values()):
        assert name.isidentifier() and name not in {"F", "torch", "self", "nn", "class"}


def test_chains_reuse_one_tensor_name_and_branches_get_their_own() -> None:
    names = tensor_names(validate(expand(zoo.template("resnet18_cifar"))))  # the flat graph
    assert names["conv2d1"] == names["batchnorm2d1"] == names["relu1"] == "x"
    assert names["layer1_0__conv1"] != names["relu1"]  # relu1 feeds a block and its shortcut


@pytest.mark.frameworks
def test_module_attribute_list_covers_torch_nn_module() -> None:
    code = "import torch.nn as nn; print(' '.join(n for n in dir(nn.Module()) if not n.startswith('_')))"
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert set(out) <= MODULE_ATTRIBUTES


@pytest.mark.frameworks
def test_hostile_ids_model_runs(tmp_path: Path) -> None:
    generate(hostile_ids_spec(), "torch").write(tmp_path)
    code = ("import numpy as np, model; m = model.build_model(); "
            "print(model.forward_numpy(m, np.ones((3, 6), dtype='float32')).shape)")
    out = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(3, 4)"


# ------------------------------------------------------------------------------------------ generated code


def training_variants() -> dict[str, PipelineSpec]:
    base = zoo.template("mnist_cnn")
    augmentation = [{"op": "random_crop", "padding": 2}, {"op": "horizontal_flip", "p": 0.5},
                    {"op": "rotation", "degrees": 10.0}, {"op": "color_jitter"}, {"op": "gaussian_noise"}]
    tabular = {"source": "sklearn:wine", "preprocessing": [{"op": "standardize"}], "input_shape": None}

    def tabular_spec(out: int, **training: object) -> PipelineSpec:
        nodes = [{"id": "input", "op": "Input"}, {"id": "fc", "op": "Linear", "params": {"out_features": out}},
                 {"id": "output", "op": "Output"}]
        edges = [{"source": "input", "target": "fc"}, {"source": "fc", "target": "output"}]
        return PipelineSpec.model_validate({"name": "tabular", "data": tabular,
                                           "model": {"nodes": nodes, "edges": edges}, "training": training})

    return {
        "sgd-step-clip": with_training(base, optimizer={"name": "sgd", "nesterov": True, "weight_decay": 5e-4},
                                       schedule={"name": "step", "step_size": 2}, gradient_clip_norm=1.0),
        "adam-warmup-early-accuracy": with_training(
            base, {"augmentation": augmentation}, optimizer={"name": "adam"},
            schedule={"name": "warmup_cosine", "warmup_epochs": 2},
            early_stopping={"patience": 2, "monitor": "val_accuracy"}, label_smoothing=0.1, precision="bf16"),
        "adamw-plateau-early-loss": with_training(
            base, {"validation_split": 0.0, "test_split": 0.2}, schedule={"name": "plateau"},
            early_stopping={"patience": 3}, checkpoint={"every_steps": None, "every_epoch": False},
            performance={"compile": "on", "channels_last": "on", "device_data": "off"}),
        "constant": with_training(base, schedule={"name": "constant"}, samples_per_epoch=100),
        "regression-mse": with_training(tabular_spec(1, loss="mse"), {"task": "regression"}),
        "regression-mae": with_training(tabular_spec(2, loss="mae"), {"task": "regression"}),
        "bce-one-logit": PipelineSpec.model_validate({
            **tabular_spec(1).model_dump(mode="json"), "data": {**tabular, "source": "sklearn:breast_cancer"},
            "training": {"loss": "bce_with_logits"}}),
        "bce-two-logits": PipelineSpec.model_validate({
            **tabular_spec(2).model_dump(mode="json"), "data": {**tabular, "source": "sklearn:breast_cancer"},
            "training": {"loss": "bce_with_logits"}}),
    }


def test_generated_programs_compile_and_pass_ruff(tmp_path: Path) -> None:
    specs: dict[str, PipelineSpec] = {f"op_{k}": v for k, v in ONE_OP.items()}
    specs["flatten_linear"] = op_cases.flatten_linear_spec()
    specs.update({f"zoo_{e.name}": e.build() for e in zoo.entries()})
    specs.update({f"train_{k}": v for k, v in training_variants().items()})
    failures = []
    for name, spec in specs.items():
        folder = tmp_path / name
        generate(spec, "torch").write(folder)
        for file in ("model.py", "train.py", "runtime.py"):
            py_compile.compile(str(folder / file), doraise=True)
        result = ruff(folder)
        if result.returncode != 0:
            failures.append(f"{name}:\n{result.stdout[-3000:]}")
    assert failures == [], "\n".join(failures)


def test_generated_model_has_one_comment_per_node_and_layers_in_graph_order() -> None:
    spec = expand(zoo.template("resnet18_cifar"))  # flat: its residual blocks written out
    program = generate(spec, "torch")
    source = program.files["model.py"]
    analysis = validate(spec)
    positions = [source.index(f"# node {node_id} ") for node_id in analysis.nodes
                 if map_model(analysis).layers[list(analysis.nodes).index(node_id)].ctor]
    assert positions == sorted(positions)
    tree = ast.parse(source)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert "FlowTrainModel" in classes


def test_image_augmentation_on_vectors_is_refused() -> None:
    nodes = [{"id": "input", "op": "Input"}, {"id": "fc", "op": "Linear", "params": {"out_features": 3}},
             {"id": "output", "op": "Output"}]
    edges = [{"source": "input", "target": "fc"}, {"source": "fc", "target": "output"}]
    spec = PipelineSpec.model_validate({
        "name": "iris", "data": {"source": "sklearn:iris", "augmentation": [{"op": "horizontal_flip"}]},
        "model": {"nodes": nodes, "edges": edges}})
    with pytest.raises(SpecError) as err:
        generate(spec, "torch")
    assert "data.augmentation[0]" in str(err.value) and "horizontal_flip needs images" in str(err.value)


HOSTILE = ('x"""; __import__(\'os\').system(\'echo pwned\'); """ \' \\\\ {{ 7*7 }} {% if %}\n'
           "\u2028\u2029 '''")


def strings_blanked(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def test_a_hostile_pipeline_name_only_ever_becomes_a_string_constant() -> None:
    benign = zoo.template("mnist_cnn")
    hostile = PipelineSpec.model_validate({**benign.model_dump(mode="json"), "name": HOSTILE,
                                           "description": HOSTILE})
    a, b = generate(benign, "torch").files, generate(hostile, "torch").files
    for name in ("model.py", "train.py", "runtime.py"):
        assert strings_blanked(a[name]) == strings_blanked(b[name]), name
    for name in ("model.py", "runtime.py"):  # the docstring and PIPELINE (train.py imports it from runtime.py)
        assert any(isinstance(n, ast.Constant) and n.value == HOSTILE for n in ast.walk(ast.parse(b[name]))), name
