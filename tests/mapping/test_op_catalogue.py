"""The op catalogue, the converters and the op cases agree, in every framework.

Every op has a converter in torch, Keras and paddle and at least one case in tests/op_cases.py;
every case maps in every framework, each node to one layer in graph order, and binds every
canonical weight the op declares. (Running the generated programs is the frameworks' tests'
job: tests/frameworks/test_equivalence.py and tests/mapping/test_*_mapping.py.)
"""

from __future__ import annotations

import importlib

import pytest

from core.codegen import generate
from core.errors import SpecError
from core.mapping.base import FRAMEWORKS, converters, support_table, unsupported_problems
from core.ops import REGISTRY
from core.validate import validate
from core.weights import canonical_shapes
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
