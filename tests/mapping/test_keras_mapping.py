"""The Keras mapper and model template: layouts, clean code, and the same function as the torch reference.

Graphs: every case of the op catalogue (tests/op_cases.py) plus the multi-op layout corners of
tests/mapping/keras_cases.py. (That every op has a converter and every case maps and binds its
weights: tests/mapping/test_op_catalogue.py.)

Golden files of the generated programs are checked in tests/test_golden.py.
"""

from __future__ import annotations

import ast
import json
import py_compile
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.codegen import generate
from core.mapping.base import unsupported_problems
from core.mapping.keras import map_model, render_context
from core.mapping.keras._common import CL, layout_of
from core.ops import REGISTRY
from core.spec import PipelineSpec
from core.validate import validate
from core.weights import canonical_shapes, random_canonical
from core.zoo.builder import GraphBuilder
from tests import op_cases
from tests.mapping.keras_cases import CORNERS, sample_input

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
RUFF = Path(sys.executable).with_name("ruff")  # the binary itself: no Python start-up per check
HERE = Path(__file__).resolve().parent


def model_source(spec: PipelineSpec) -> str:
    from core.codegen import environment

    analysis = validate(spec)
    return environment("keras").get_template("model.py.j2").render(**render_context(spec, analysis))


def ruff(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    """``ruff check`` with its default rules at the programs' line length (120, as core/codegen.py formats
    them), run in the files' folder as a user would (no project configuration applies, and
    data.py/model.py/runtime.py there are first-party)."""
    return subprocess.run([RUFF, "check", "--isolated", "--no-cache", "--line-length", "120", *(p.name for p in paths)],
                          capture_output=True, text=True, cwd=paths[0].parent)


# ------------------------------------------------------------------------------------------ mapping (no frameworks)


def all_cases() -> dict[str, PipelineSpec]:
    """The op catalogue's graphs and the multi-op layout corners."""
    return {**{f"op_{k}": v for k, v in op_cases.specs().items()}, **{k: build() for k, build in CORNERS.items()}}


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corner_maps_and_binds_every_canonical_weight_once(name: str) -> None:
    analysis = validate(CORNERS[name]())
    assert unsupported_problems(analysis, "keras") == []
    mapped = map_model(analysis)
    bound = sorted(b.canonical for layer in mapped.layers for b in layer.weights)
    assert bound == sorted(canonical_shapes(analysis))
    assert [layer.node_id for layer in mapped.layers] == list(analysis.nodes)


@pytest.mark.parametrize("name", [c.name for c in op_cases.CASES
                                  if REGISTRY.get(c.op).reads_channels and len(c.shape) >= 2])
def test_ops_that_read_channels_run_channels_last(name: str) -> None:
    """Op.reads_channels is what feeds an image or signal to the op channels-last, and its Keras
    layer takes it as it comes (no transpose in front of it)."""
    layers = {layer.node_id: layer for layer in map_model(validate(op_cases.BY_NAME[name].spec())).layers}
    assert layout_of(layers["input"]) == CL
    assert "ops.transpose" not in layers["node"].forward, layers["node"].forward


def test_generated_models_compile_and_pass_ruff(tmp_path: Path) -> None:
    paths = []
    specs = dict(all_cases())
    specs.update({f"zoo_{e.name}": e.build() for e in zoo.entries()})
    for name, spec in specs.items():
        path = tmp_path / f"{name}.py"
        path.write_text(model_source(spec), encoding="utf-8")
        py_compile.compile(str(path), doraise=True)
        paths.append(path)
    result = ruff(paths)
    assert result.returncode == 0, result.stdout + result.stderr


def _variants() -> dict[str, PipelineSpec]:
    """Zoo templates plus training/data settings that switch template branches on."""
    specs = {e.name: e.build() for e in zoo.entries()}
    base = zoo.template("mnist_cnn").model_dump(mode="json")
    every_aug = [{"op": "random_crop", "padding": 2}, {"op": "horizontal_flip"}, {"op": "rotation"},
                 {"op": "color_jitter"}, {"op": "gaussian_noise"}]
    changes = {
        "augment_all": ({"augmentation": every_aug, "test_split": 0.1}, {"label_smoothing": 0.1}),
        "plateau_early": ({}, {"schedule": {"name": "plateau"}, "early_stopping": {"patience": 2},
                               "optimizer": {"name": "sgd", "weight_decay": 1e-4}, "gradient_clip_norm": 1.0}),
        "step_adam_acc": ({}, {"schedule": {"name": "step"}, "optimizer": {"name": "adam", "weight_decay": 0.1},
                               "early_stopping": {"patience": 1, "monitor": "val_accuracy"}}),
        "warmup_bf16": ({}, {"schedule": {"name": "warmup_cosine"}, "precision": "bf16",
                             "performance": {"xla": "on"}, "checkpoint": {"every_steps": None}}),
    }
    for name, (data, training) in changes.items():
        doc = {**base, "data": {**base["data"], **data}, "training": {**base["training"], **training}}
        specs[name] = PipelineSpec.model_validate(doc)
    g = GraphBuilder()
    g.add("Output", g.chain(g.add("Input", id="input"), ("Linear", {"out_features": 1})), id="output")
    specs["regression"] = g.spec("reg", "", {"source": "sklearn:wine", "task": "regression",
                                              "preprocessing": [{"op": "standardize"}]}, {"loss": "mae"})
    specs["binary"] = g.spec("bin", "", {"source": "sklearn:breast_cancer", "preprocessing": [{"op": "standardize"}]},
                             {"loss": "bce_with_logits"})
    return specs


def test_generated_programs_compile_and_pass_ruff(tmp_path: Path) -> None:
    for name, spec in _variants().items():
        folder = tmp_path / name
        generate(spec, "keras").write(folder)
        paths = [folder / n for n in ("model.py", "train.py", "data.py", "runtime.py")]
        for path in paths:
            py_compile.compile(str(path), doraise=True)
        result = ruff(paths)
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"


def test_layout_choices_for_mnist_cnn() -> None:
    """Images enter channels-last; the Dense after Flatten absorbs the order (no transpose in call)."""
    source = model_source(zoo.template("mnist_cnn"))
    assert "KERAS_INPUT_SHAPE = (28, 28, 1)" in source
    assert "ops.transpose" not in source
    assert "dense_kernel_from_channels_first(a['linear1/weight'], (64, 12, 12))" in source
    assert "approximate" not in source and "momentum" not in source


def test_torch_numbers_are_converted() -> None:
    source = model_source(op_cases.BY_NAME["BatchNorm2d-momentum"].spec())
    assert "BatchNorm(momentum=0.8, epsilon=0.001)" in source  # torch momentum 0.2 → Keras 0.8
    assert "ops.gelu(x, approximate=False)" in model_source(CORNERS["activations"]())
    assert "unit_forget_bias=False" in model_source(op_cases.BY_NAME["LSTM"].spec())
    assert "reset_after=True" in model_source(op_cases.BY_NAME["GRU-stacked"].spec())


HOSTILE = "x\"\"\"''' \\ {{ 7*7 }} {% if 1 %}\n__import__('os').system('echo pwned')\u2028#"


def test_hostile_strings_stay_string_literals() -> None:
    """User text (the name, description, data target and columns) reaches the code only as string constants."""
    spec = zoo.template("mlp").model_copy(update={"name": HOSTILE, "description": HOSTILE})
    data = spec.data.model_copy(update={"source": "t.csv", "format": "csv", "target": HOSTILE, "num_classes": 10,
                                        "input_shape": [1, 28, 28], "preprocessing": []})
    spec = PipelineSpec.model_validate({**spec.model_dump(), "data": data.model_dump()})
    program = generate(spec, "keras")
    for name in ("model.py", "train.py", "runtime.py"):
        tree = ast.parse(program.files[name])
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert "__import__" not in names, name
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value == HOSTILE:
                break
        else:
            # PIPELINE is defined in runtime.py, and train.py imports it from there
            assert name != "runtime.py", f"{name} does not carry the pipeline name as a string constant"
    assert "pwned" not in program.files["model.py"]


# ------------------------------------------------------------------------------------------ equivalence (frameworks)


def _equivalence(specs: dict[str, PipelineSpec], tmp_path: Path) -> dict[str, float]:
    """Max abs difference between the Keras model and the torch reference, per spec."""
    keras_cases, torch_jobs = [], []
    for name, spec in specs.items():
        analysis = validate(spec)
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.py").write_text(model_source(spec), encoding="utf-8")
        arrays = random_canonical(analysis, seed=3)
        np.savez(folder / "weights.npz", **arrays)
        np.save(folder / "input.npy", sample_input(spec))
        graph = analysis.summary()
        for layer in graph["layers"]:
            layer["params"] = analysis.nodes[layer["id"]].params
        graph["output"] = analysis.output_id
        (folder / "graph.json").write_text(json.dumps(graph), encoding="utf-8")
        keras_cases.append({"dir": str(folder), "weights": str(folder / "weights.npz"),
                            "input": str(folder / "input.npy"), "output": str(folder / "keras.npy"),
                            "roundtrip": str(folder / "roundtrip.npz")})
        torch_jobs.append([str(folder / n) for n in ("graph.json", "weights.npz", "input.npy", "torch.npy")])
    (tmp_path / "cases.json").write_text(json.dumps(keras_cases), encoding="utf-8")
    done = subprocess.run([PYTHON, str(HERE / "keras_model_worker.py"), str(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    script = ("import runpy, sys\n"
              f"ref = runpy.run_path({str(HERE / 'torch_reference.py')!r})\n"
              f"for job in {torch_jobs!r}:\n    ref['main'](*job)\n")
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    diffs = {}
    for name in specs:
        folder = tmp_path / name
        got, want = np.load(folder / "keras.npy"), np.load(folder / "torch.npy")
        assert got.shape == want.shape, f"{name}: keras {got.shape} vs torch {want.shape}"
        diffs[name] = float(np.abs(got.astype(np.float64) - want).max())
        lstm = {n.id for n in validate(specs[name]).nodes.values() if n.op == "LSTM"}
        _check_roundtrip(name, folder, lstm)
    return diffs


def _check_roundtrip(name: str, folder: Path, lstm: set[str]) -> None:
    """canonical_weights(load(w)) gives w back (an LSTM's bias pair comes back as its sum, b_hh = 0)."""
    loaded, back = dict(np.load(folder / "weights.npz")), dict(np.load(folder / "roundtrip.npz"))
    assert sorted(loaded) == sorted(back), name
    summed = {key for key in loaded if key.split("/")[0] in lstm and "/bias_" in key}
    for key, value in loaded.items():
        if key not in summed:
            np.testing.assert_allclose(back[key], value, atol=1e-7, err_msg=f"{name}: {key}")
    for key in summed:
        if "/bias_ih" in key:
            pair = key.replace("bias_ih", "bias_hh")
            np.testing.assert_allclose(back[key] + back[pair], loaded[key] + loaded[pair], atol=1e-6)


@pytest.mark.frameworks
def test_every_case_matches_the_torch_reference(tmp_path: Path) -> None:
    diffs = _equivalence(all_cases(), tmp_path)
    bad = {k: v for k, v in diffs.items() if not v <= 1e-4}
    assert bad == {}, f"max abs difference above 1e-4: {bad}"


@pytest.mark.frameworks
def test_zoo_templates_match_the_torch_reference(tmp_path: Path) -> None:
    names = ["mnist_cnn", "lenet5", "resnet18_cifar", "lstm_text_classifier", "transformer_text_classifier"]
    diffs = _equivalence({n: zoo.template(n) for n in names}, tmp_path)
    bad = {k: v for k, v in diffs.items() if not v <= 1e-4}
    assert bad == {}, f"max abs difference above 1e-4: {bad}"
