"""The op catalogue, the converters and the op cases agree, in every framework.

Every op has a converter in torch, Keras and paddle and at least one case in tests/op_cases.py;
every case maps in every framework, each node to one layer in graph order, and binds every
canonical weight the op declares. (Running the generated programs is the frameworks' tests'
job: tests/frameworks/test_equivalence.py and tests/mapping/test_*_mapping.py; here they only show
that each program's weights start as the ops declare.)
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.codegen import generate
from core.errors import SpecError
from core.mapping.base import FRAMEWORKS, converters, support_table, unsupported_problems
from core.ops import REGISTRY, Weight
from core.validate import validate
from core.weights import canonical_shapes, canonical_weights
from tests.op_cases import BY_NAME, CASES


def test_every_op_has_a_converter_in_every_framework() -> None:
    table = support_table()
    missing = {fw: [op for op in REGISTRY.names() if not table[op][fw]] for fw in FRAMEWORKS}
    assert missing == {fw: [] for fw in FRAMEWORKS}, "add the converters named in docs/adding-an-op.md"


def test_every_op_has_a_case() -> None:
    io = set(REGISTRY.families()["io"])  # Input and Output are in every case's graph
    without = sorted(set(REGISTRY.names()) - io - {case.op for case in CASES})
    assert without == [], f"add a case to tests/op_cases.py for {without}"
    assert len(BY_NAME) == len(CASES), "two cases share a name"


def test_the_guide_names_files_that_exist() -> None:
    """docs/adding-an-op.md lists the files a new op touches: each path it names exists (for one family)."""
    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "adding-an-op.md").read_text(encoding="utf-8")
    paths = {p.replace("<family>", "activation").replace("<fw>", "torch")
             for p in re.findall(r"`((?:core|tests|docs|templates)/[\w/<>.-]+)`", guide)}
    assert {"core/ops/activation.py", "tests/op_cases.py", "tests/mapping/torch_reference.py"} <= paths
    assert sorted(p for p in paths if not (root / p).exists()) == []


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_case_maps_and_binds_every_canonical_weight(framework: str, name: str) -> None:
    analysis = validate(BY_NAME[name].spec())
    assert unsupported_problems(analysis, framework) == []
    mapped = importlib.import_module(f"core.mapping.{framework}").map_model(analysis)
    assert [layer.node_id for layer in mapped.layers] == list(analysis.nodes)
    bound = {b.canonical for layer in mapped.layers for b in layer.weights}
    assert bound == set(canonical_shapes(analysis))


def test_an_op_without_a_converter_is_refused_naming_the_node_and_the_frameworks_that_have_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(converters("keras").converters, "GELU")
    spec = BY_NAME["GELU"].spec()
    problems = unsupported_problems(validate(spec), "keras")
    assert [(p.node, p.received) for p in problems] == [("node", "GELU")]
    assert "keras has no converter for GELU" in problems[0].message
    assert problems[0].fix == "choose torch or paddle for this graph"
    with pytest.raises(SpecError) as err:
        generate(spec, "keras")
    assert "model.nodes[node]" in str(err.value) and "GELU" in str(err.value)


def test_a_second_converter_for_an_op_is_refused() -> None:
    with pytest.raises(ValueError, match="'ReLU' already has a converter"):
        converters("torch").register("ReLU")(lambda ctx: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="unknown op 'NoSuchOp'"):
        converters("paddle").register("NoSuchOp")(lambda ctx: None)  # type: ignore[arg-type, return-value]


# ------------------------------------------------------------------------------------------ with the frameworks

_START = r"""
import importlib.util, json, sys
import numpy as np
framework, root = sys.argv[1], sys.argv[2]
if framework == "torch":
    import torch
    torch.manual_seed(0)
elif framework == "paddle":
    import paddle
    paddle.seed(0)
else:
    import keras
    keras.utils.set_random_seed(0)
for i, name in enumerate(json.load(open(f"{root}/cases.json"))):
    spec = importlib.util.spec_from_file_location(f"model_{i}", f"{root}/{name}/{framework}/model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    np.savez(f"{root}/{name}/{framework}.npz", **module.canonical_weights(module.build_model()))
"""


def assert_starts_as_declared(key: str, value: np.ndarray, w: Weight) -> None:
    if w.init in ("ones", "zeros"):
        assert np.all(value == (1.0 if w.init == "ones" else 0.0)), key
    elif w.init == "uniform":
        bound = 1 / math.sqrt(w.fan_in)
        assert np.abs(value).max() <= bound * (1 + 1e-6), (key, np.abs(value).max(), bound)
        if value.size >= 64:  # and it spans the interval, not a narrower one (fails by chance with p < 1e-6)
            assert np.abs(value).max() >= 0.8 * bound, (key, np.abs(value).max(), bound)
    elif value.size >= 64:  # normal
        assert 0.6 * w.std <= value.std() <= 1.4 * w.std, (key, value.std(), w.std)


@pytest.mark.frameworks
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_generated_programs_start_from_the_initialisers_the_ops_declare(framework: str, tmp_path: Path) -> None:
    cases = [c for c in CASES if canonical_shapes(validate(c.spec()))]
    for case in cases:
        generate(case.spec(), framework).write(tmp_path / case.name / framework)
    (tmp_path / "cases.json").write_text(json.dumps([c.name for c in cases]))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "GLOG_minloglevel": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", _START, framework, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    for case in cases:
        analysis = validate(case.spec())
        with np.load(tmp_path / case.name / f"{framework}.npz") as arrays:
            for key, w in canonical_weights(analysis).items():
                if framework == "keras" and case.op == "LSTM" and "/bias_hh" in key:
                    continue  # Keras keeps one LSTM bias: it comes back as bias_ih, bias_hh = 0
                assert_starts_as_declared(f"{case.name}: {key}", arrays[key], w)
