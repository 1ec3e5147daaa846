"""Whatever the validator accepts generates code that compiles in every framework, with a comment naming
each node; whatever it refuses is refused naming the node and the field; and user text reaches the
generated code only inside string literals."""

from __future__ import annotations

import io
import re
import tokenize
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core import zoo
from core.codegen import generate
from core.errors import SpecError
from core.load import spec_from_dict
from core.mapping.base import FRAMEWORKS, unsupported_problems
from core.validate import Analysis, analyse

MARK = "PWNED"
HOSTILE = [
    f"x'''\n__import__('os').system('{MARK}')",
    f'"""{MARK}"""; import os',
    f"{{{{ {MARK} }}}}{{% if 1 %}}",
    f"{MARK}\u2028import os\u2029",
    f"\\\\{MARK}\\",
    f"{MARK}\nimport os  # ",
    f"${{{MARK}}} `{MARK}` $({MARK})",
]


def code_tokens_outside_strings(source: str) -> list[str]:
    """Every token of the module that is not a string literal (comments included)."""
    return [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type != tokenize.STRING]


def string_literals(source: str) -> list[str]:
    return [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.STRING]


def assert_user_text_only_in_strings(files: dict[str, str]) -> None:
    carried = 0
    for name, source in files.items():
        if not name.endswith(".py"):
            continue
        compile(source, name, "exec")
        leaked = [t for t in code_tokens_outside_strings(source) if MARK in t]
        assert not leaked, f"{name}: user text outside a string literal: {leaked[:3]}"
        carried += sum(MARK in s for s in string_literals(source))
    assert carried, "the hostile text should reach the program (as the pipeline's name, at least)"


def hostile_specs() -> list[dict[str, Any]]:
    specs = []
    for i, text in enumerate(HOSTILE):
        doc = zoo.template("mnist_cnn").model_dump(mode="json")
        doc["name"] = text[:200]
        doc["description"] = text
        for node in doc["model"]["nodes"]:
            node["label"] = text
        specs.append(doc)
        table = {
            "name": text[:200], "description": text,
            "data": {"source": f"tables/{i}.csv", "format": "csv", "target": text, "num_classes": 3,
                     "preprocessing": [{"op": "one_hot", "columns": [text, "plain"]}, {"op": "standardize"}],
                     "input_shape": [12]},
            "model": {"nodes": [{"id": "x", "op": "Input", "label": text},
                                {"id": "fc", "op": "Linear", "params": {"out_features": 3}, "label": text},
                                {"id": "y", "op": "Output"}],
                      "edges": [{"source": "x", "target": "fc"}, {"source": "fc", "target": "y"}]},
        }
        specs.append(table)
        text_doc = zoo.template("lstm_text_classifier").model_dump(mode="json")
        text_doc["data"]["target"] = text
        text_doc["data"]["preprocessing"][0]["column"] = text
        specs.append(text_doc)
    return specs


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("index", range(len(HOSTILE) * 3))
def test_hostile_strings_reach_code_only_as_string_literals(framework: str, index: int) -> None:
    program = generate(spec_from_dict(hostile_specs()[index]), framework)
    assert_user_text_only_in_strings(program.files)


# --------------------------------------------------------------------------- random valid graphs

CHAIN_OPS = {
    "image": [("Conv2d", {"out_channels": st.integers(1, 6), "kernel_size": st.integers(1, 3),
                          "stride": st.integers(1, 2), "padding": st.sampled_from([0, 1, "same"]),
                          "bias": st.booleans()}),
              ("MaxPool2d", {"kernel_size": st.just(2), "ceil_mode": st.booleans()}),
              ("AvgPool2d", {"kernel_size": st.just(2)}),
              ("BatchNorm2d", {}), ("ReLU", {}), ("GELU", {}), ("SiLU", {}), ("Tanh", {}),
              ("Dropout", {"p": st.floats(0, 0.5)})],
    "vector": [("Linear", {"out_features": st.integers(1, 12), "bias": st.booleans()}),
               ("BatchNorm1d", {}), ("LayerNorm", {}), ("ReLU", {}), ("LeakyReLU", {}), ("Sigmoid", {}),
               ("Dropout", {"p": st.floats(0, 0.5)})],
}


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    nodes = [{"id": "x", "op": "Input"}]
    edges = []
    prev = "x"
    for kind in ("image", "vector"):
        for i in range(draw(st.integers(0, 4))):
            op, params = draw(st.sampled_from(CHAIN_OPS[kind]))
            nid = f"{kind[0]}{i}"
            nodes.append({"id": nid, "op": op, "params": {k: draw(v) for k, v in params.items()}})
            edges.append({"source": prev, "target": nid})
            prev = nid
        if kind == "image":
            nodes.append({"id": "flat", "op": draw(st.sampled_from(["Flatten", "GlobalAvgPool"]))})
            edges.append({"source": prev, "target": "flat"})
            prev = "flat"
    nodes += [{"id": "head", "op": "Linear", "params": {"out_features": 10}}, {"id": "y", "op": "Output"}]
    edges += [{"source": prev, "target": "head"}, {"source": "head", "target": "y"}]
    return {"data": {"source": "sklearn:digits"}, "model": {"nodes": nodes, "edges": edges},
            "training": {"epochs": 1}}


def assert_refused_naming_node_and_field(spec: Any, result: Analysis) -> None:
    """A drawn graph the validator refuses: every problem points at a node of the graph (by id and
    location) and says what it expected; generating any program refuses with the same problems."""
    ids = {n.id for n in spec.model.nodes}
    for problem in result.problems:
        assert problem.node in ids and problem.location.startswith(f"model.nodes[{problem.node}]"), problem
        assert problem.message and problem.expected, problem
    with pytest.raises(SpecError) as err:
        generate(spec, "torch")
    assert [p.location for p in err.value.problems] == [p.location for p in result.problems]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_specs())
def test_every_valid_spec_generates_code_that_compiles(doc: dict[str, Any]) -> None:
    spec = spec_from_dict(doc)
    result = analyse(spec)
    if result.problems:  # the drawn sizes can shrink an image below a kernel: refused, naming the node
        assert_refused_naming_node_and_field(spec, result)
        assume(False)
    for framework in FRAMEWORKS:
        assert unsupported_problems(result, framework) == []  # every op has a converter in every framework
        program = generate(spec, framework, analysis=result)
        for name, source in program.files.items():
            if name.endswith(".py"):
                compile(source, f"{framework}/{name}", "exec")
        comments = " ".join(tok.string for tok in tokenize.generate_tokens(
            io.StringIO(program.files["model.py"]).readline) if tok.type == tokenize.COMMENT)
        for node in spec.model.nodes[1:-1]:  # a comment names each layer's node, so a user finds its code
            assert re.search(rf"(?<!\w){re.escape(node.id)}(?!\w)", comments), (framework, node.id)
