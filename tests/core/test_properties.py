"""Property-based: whatever the document, validation passes or raises the project's own error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import Problem, SpecError
from core.load import spec_from_dict, spec_from_json
from core.ops import REGISTRY
from core.spec import PipelineSpec
from core.validate import Analysis, analyse

OPS = REGISTRY.names()
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**13), st.floats(allow_nan=True),
                    st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=8), inner, max_size=3), max_leaves=8)


def param_values(op: str) -> st.SearchStrategy[dict[str, Any]]:
    names = [p.name for p in REGISTRY.get(op).params]
    good = {
        "int": st.integers(1, 8), "float": st.floats(0, 0.9), "bool": st.booleans(),
        "int_pair": st.integers(1, 4), "padding": st.sampled_from([0, 1, "same", "valid"]),
        "shape": st.lists(st.integers(1, 8), min_size=1, max_size=3), "ints": st.lists(st.integers(0, 3)),
        "node": st.sampled_from(["in", "n0", "n1", "missing"]),
    }
    strategies = {}
    for prm in REGISTRY.get(op).params:
        base = st.sampled_from(prm.choices) if prm.kind == "choice" else good[prm.kind]
        strategies[prm.name] = st.one_of(base, values)
    return st.fixed_dictionaries({}, optional=strategies) if names else st.just({})


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 12))
    nodes = [{"id": "in", "op": "Input", "params": draw(st.sampled_from([{}, {"shape": [1, 8, 8]}, {"shape": [16]},
                                                                         {"shape": [6, 4]}]))}]
    for i in range(n):
        op = draw(st.sampled_from(OPS))
        nodes.append({"id": f"n{i}", "op": op, "params": draw(param_values(op))})
    nodes.append({"id": "out", "op": "Output"})
    ids = [node["id"] for node in nodes]
    edges = []
    for i in range(1, len(ids)):  # mostly a chain, sometimes extra or backward edges
        edges.append({"source": ids[i - 1], "target": ids[i]})
    for _ in range(draw(st.integers(0, 3))):
        edges.append({"source": draw(st.sampled_from(ids)), "target": draw(st.sampled_from(ids)),
                      "port": draw(st.one_of(st.none(), st.integers(0, 2)))})
    return {"data": {"source": "sklearn:digits"}, "model": {"nodes": nodes, "edges": edges}}


def assert_reported(problems: list[Problem], node_ids: set[str] | None = None) -> None:
    """What a user is shown: every problem with a location and a message (and, when it names a node,
    a node of the drawing), all of them in one error whose text names each location (the CLI and
    the portal print ``str(err)``)."""
    assert problems, "an invalid spec must say what is wrong"
    for problem in problems:
        assert problem.location and problem.message, problem
        if node_ids is not None and problem.node is not None:
            assert problem.node in node_ids, problem
    text = str(SpecError(problems))
    assert text.startswith(f"{len(problems)} problem(s)") and all(p.location in text for p in problems)


def outcome(load: Callable[[], PipelineSpec]) -> tuple[Analysis | None, list[Problem]]:
    """(the analysis, []) for a valid spec, else (None or the analysis, every problem found)."""
    try:
        result = analyse(load())
    except SpecError as err:
        return None, err.problems
    return result, result.problems


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_validate_or_raise_spec_error(doc: dict[str, Any]) -> None:
    result, problems = outcome(lambda: spec_from_dict(doc))
    if problems:
        assert_reported(problems, {node["id"] for node in doc["model"]["nodes"]})
    else:
        assert result is not None and result.output_id in result.nodes
        assert result.nodes[result.output_id].op == "Output"


@settings(max_examples=200, deadline=None)
@given(values)
def test_arbitrary_json_documents(doc: Any) -> None:
    """Any JSON value: a valid spec, or the project's own error with every problem located
    (never a crash of another kind, which hypothesis would report)."""
    result, problems = outcome(lambda: spec_from_json(json.dumps(doc)))
    if problems:
        assert_reported(problems)
    else:
        assert result is not None and result.output_id in result.nodes
    if not isinstance(doc, dict):
        assert [p.location for p in problems] == ["(document)"]
