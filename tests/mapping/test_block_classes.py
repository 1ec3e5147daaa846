"""Blocks in the generated programs: one class per block, instantiated per use with its arguments, in
every framework; names that would shadow the program's own are renamed; the block's description is
only ever a string literal; and the programs compute what the expanded graph computes."""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

import pytest

from core import zoo
from core.codegen import generate, mapper
from core.equivalence import check
from core.load import spec_from_dict
from core.mapping.base import FRAMEWORKS
from tests.mapping.test_generation_properties import HOSTILE, MARK, assert_user_text_only_in_strings


def classes(source: str) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_resnet_blocks_are_one_class_each_instantiated_per_use(framework: str) -> None:
    model = generate(zoo.template("resnet18_cifar"), framework).files["model.py"]
    assert {"BasicBlock", "BasicBlockDown", "FlowTrainModel"} <= classes(model).keys()
    assert len(re.findall(r"^class BasicBlock\(", model, re.M)) == 1
    assert "self.layer2_0 = BasicBlockDown(in_channels=64, channels=128, stride=2)" in model
    assert "self.layer4_1 = BasicBlock(channels=512)" in model
    assert len(re.findall(r"= BasicBlock(Down)?\(", model)) == 8  # the 8 uses
    init = next(f for f in classes(model)["BasicBlockDown"].body if isinstance(f, ast.FunctionDef))
    assert [a.arg for a in init.args.args] == ["self", "in_channels", "channels", "stride"]


def two_input_spec(description: str = "", param: str = "width") -> dict[str, Any]:
    """Digits → two uses of ``dense`` → ``merge`` (a block with two inputs) → head."""
    dense = {"name": "dense", "description": description, "inputs": ["x"],
             "params": [{"name": param, "type": "int", "default": 32}],
             "nodes": [{"id": "fc", "op": "Linear", "params": {"out_features": {"param": param}}},
                       {"id": "act", "op": "ReLU"}],
             "edges": [{"source": "x", "target": "fc"}, {"source": "fc", "target": "act"}], "output": "act"}
    merge = {"name": "merge", "inputs": ["a", "b"], "params": [{"name": "self", "type": "int", "default": 16}],
             "nodes": [{"id": "sum", "op": "Add"}, {"id": "fc", "op": "Linear",
                                                     "params": {"out_features": {"param": "self"}}}],
             "edges": [{"source": "a", "target": "sum", "port": 0}, {"source": "b", "target": "sum", "port": 1},
                       {"source": "sum", "target": "fc"}], "output": "fc"}
    return {
        "name": "two_inputs", "data": {"source": "sklearn:digits"},
        "model": {
            "blocks": [dense, merge],
            "nodes": [{"id": "input", "op": "Input"}, {"id": "flat", "op": "Flatten"},
                      {"id": "d1", "op": "dense", "params": {param: 48}}, {"id": "d2", "op": "dense",
                                                                         "params": {param: 48}},
                      {"id": "m", "op": "merge", "params": {"self": 24}},
                      {"id": "head", "op": "Linear", "params": {"out_features": 10}}, {"id": "output", "op": "Output"}],
            "edges": [{"source": "input", "target": "flat"}, {"source": "flat", "target": "d1"},
                      {"source": "d1", "target": "d2"}, {"source": "d1", "target": "m", "port": 1},
                      {"source": "d2", "target": "m", "port": 0}, {"source": "m", "target": "head"},
                      {"source": "head", "target": "output"}],
        },
        "training": {"epochs": 1},
    }


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("param", ["nn", "layers", "keras", "paddle", "torch", "F", "print", "build_model", "width"])
def test_block_parameters_that_would_shadow_the_programs_names_are_renamed(framework: str, param: str) -> None:
    files = generate(spec_from_dict(two_input_spec(param=param)), framework).files
    model = files["model.py"]
    compile(model, "model.py", "exec")
    init = next(f for f in classes(model)["Dense"].body if isinstance(f, ast.FunctionDef))
    [arg] = [a.arg for a in init.args.args[1:] if a.arg.startswith(param)]
    shadows = param in mapper(framework).MODULE_NAMES or param in dir(builtins)
    assert arg == (f"{param}_" if shadows else param)
    assert f"= Dense(in_features=64, {arg}=48)" in model
    merge_init = next(f for f in classes(model)["Merge"].body if isinstance(f, ast.FunctionDef))
    # The input's size is an argument too (Linear reads it), written from the definition even though
    # merge has one use; its parameter `self` would hide the instance and is renamed.
    assert [a.arg for a in merge_init.args.args] == ["self", "in_features", "self_"]
    assert "= Merge(in_features=48, self_=24)" in model
    call = next(f for f in classes(model)["Merge"].body if isinstance(f, ast.FunctionDef)
                and f.name in ("forward", "call"))
    assert [a.arg for a in call.args.args][:3] == ["self", "a", "b"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_block_description_is_only_a_string_literal(framework: str, text: str) -> None:
    doc = two_input_spec(description=text)
    doc["name"] = f"{MARK}"
    files = generate(spec_from_dict(doc), framework).files
    assert_user_text_only_in_strings(files)
    # the text as written, but for what ruff format does to every docstring: trailing spaces on a line go
    assert ast.get_docstring(classes(files["model.py"])["Dense"]) == "\n".join(line.rstrip(" \t") for line in text.split("\n"))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_uses_of_different_form_get_a_class_each(framework: str) -> None:
    """A stride of 1 and of 2 with 'same' padding are different code in every framework."""
    block = {"name": "conv_block", "params": [{"name": "stride", "type": "int", "default": 1}],
             "nodes": [{"id": "conv", "op": "Conv2d", "params": {"out_channels": 4, "kernel_size": 3,
                                                                  "padding": "same", "stride": {"param": "stride"}}}],
             "edges": [{"source": "x", "target": "conv"}], "output": "conv"}
    doc = {"name": "forms", "data": {"source": "sklearn:digits"},
           "model": {"blocks": [block],
                     "nodes": [{"id": "input", "op": "Input"}, {"id": "c1", "op": "conv_block"},
                               {"id": "c2", "op": "conv_block", "params": {"stride": 2}},
                               {"id": "pool", "op": "GlobalAvgPool"},
                               {"id": "head", "op": "Linear", "params": {"out_features": 10}},
                               {"id": "output", "op": "Output"}],
                     "edges": [{"source": a, "target": b} for a, b in
                               [("input", "c1"), ("c1", "c2"), ("c2", "pool"), ("pool", "head"), ("head", "output")]]}}
    model = generate(spec_from_dict(doc), framework).files["model.py"]
    assert {"ConvBlock", "ConvBlock_2"} <= classes(model).keys()
    assert "self.c1 = ConvBlock(" in model and "self.c2 = ConvBlock_2(" in model


def flatten_block_spec() -> dict[str, Any]:
    """A block ending in a Flatten of channels-last images (in Keras) feeding a Linear outside it."""
    block = {"name": "features", "params": [{"name": "channels", "type": "int", "default": 4}],
             "nodes": [{"id": "conv", "op": "Conv2d", "params": {"out_channels": {"param": "channels"},
                                                                  "kernel_size": 3, "padding": 1}},
                       {"id": "flat", "op": "Flatten"}],
             "edges": [{"source": "x", "target": "conv"}, {"source": "conv", "target": "flat"}], "output": "flat"}
    return {"name": "flatten_block", "data": {"source": "sklearn:digits", "input_shape": [1, 8, 8]},
            "model": {"blocks": [block],
                      "nodes": [{"id": "input", "op": "Input"}, {"id": "f", "op": "features", "params": {"channels": 3}},
                                {"id": "head", "op": "Linear", "params": {"out_features": 10}},
                                {"id": "output", "op": "Output"}],
                      "edges": [{"source": "input", "target": "f"}, {"source": "f", "target": "head"},
                                {"source": "head", "target": "output"}]},
            "training": {"epochs": 1}}


def nested_spec() -> dict[str, Any]:
    """``pair`` (two uses of ``conv_bn`` bound to pair's ``width``) used twice with different widths,
    on inputs of different channels; conv_bn's kernel (3) equals one use's width by coincidence."""
    conv_bn = {"name": "conv_bn", "params": [{"name": "c", "type": "int", "default": 4}],
               "nodes": [{"id": "conv", "op": "Conv2d", "params": {"out_channels": {"param": "c"}, "kernel_size": 3,
                                                                    "padding": 1}},
                         {"id": "bn", "op": "BatchNorm2d"}],
               "edges": [{"source": "x", "target": "conv"}, {"source": "conv", "target": "bn"}], "output": "bn"}
    pair = {"name": "pair", "params": [{"name": "width", "type": "int", "default": 8}],
            "nodes": [{"id": "a", "op": "conv_bn", "params": {"c": {"param": "width"}}},
                      {"id": "b", "op": "conv_bn", "params": {"c": {"param": "width"}}}],
            "edges": [{"source": "x", "target": "a"}, {"source": "a", "target": "b"}], "output": "b"}
    nodes = [{"id": "input", "op": "Input"}, {"id": "p1", "op": "pair", "params": {"width": 3}},
             {"id": "p2", "op": "pair", "params": {"width": 6}}, {"id": "pool", "op": "GlobalAvgPool"},
             {"id": "head", "op": "Linear", "params": {"out_features": 10}}, {"id": "output", "op": "Output"}]
    return {"name": "nested", "data": {"source": "sklearn:digits"},
            "model": {"blocks": [conv_bn, pair], "nodes": nodes,
                      "edges": [{"source": a, "target": b} for a, b in
                                [("input", "p1"), ("p1", "p2"), ("p2", "pool"), ("pool", "head"), ("head", "output")]]},
            "training": {"epochs": 1}}


def regroup_spec() -> dict[str, Any]:
    """A block whose forward pass reads a parameter (a Reshape to ``groups`` rows), used with 4 and 2."""
    block = {"name": "regroup", "params": [{"name": "groups", "type": "int", "default": 4}],
             "nodes": [{"id": "fc", "op": "Linear", "params": {"out_features": 16}},
                       {"id": "rs", "op": "Reshape", "params": {"shape": [{"param": "groups"}, -1]}},
                       {"id": "sm", "op": "Softmax"}, {"id": "fl", "op": "Flatten"}],
             "edges": [{"source": a, "target": b} for a, b in [("x", "fc"), ("fc", "rs"), ("rs", "sm"), ("sm", "fl")]],
             "output": "fl"}
    chain = [("input", "flat"), ("flat", "r1"), ("r1", "r2"), ("r2", "head"), ("head", "output")]
    return {"name": "regroup", "data": {"source": "sklearn:digits"},
            "model": {"blocks": [block],
                      "nodes": [{"id": "input", "op": "Input"}, {"id": "flat", "op": "Flatten"},
                                {"id": "r1", "op": "regroup", "params": {"groups": 4}},
                                {"id": "r2", "op": "regroup", "params": {"groups": 2}},
                                {"id": "head", "op": "Linear", "params": {"out_features": 10}},
                                {"id": "output", "op": "Output"}],
                      "edges": [{"source": a, "target": b} for a, b in chain]},
            "training": {"epochs": 1}}


@pytest.mark.frameworks
@pytest.mark.parametrize("doc", [two_input_spec(param="nn"), flatten_block_spec(), nested_spec(), regroup_spec()],
                         ids=["two-inputs", "flatten", "nested", "regroup"])
def test_a_spec_with_blocks_computes_the_same_in_every_framework(doc: dict[str, Any]) -> None:
    """A two-input block with its ports swapped and renamed parameters, a block whose output is
    flattened channels-last in Keras, nested blocks whose class serves uses of different sizes, and
    a forward pass that reads an argument: the same outputs for the same weights."""
    report = check(spec_from_dict(doc), tolerance=1e-6, batch=2)
    assert report.compared == list(FRAMEWORKS), report.text()
    assert report.ok, report.text()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_use_whose_second_input_comes_later_than_its_first_inner_node(framework: str) -> None:
    """Port b's source is computed after port a's first consumer in the expanded order: the model
    still builds the use after both of its inputs."""
    block = {"name": "late", "inputs": ["a", "b"],
             "nodes": [{"id": "fa", "op": "Linear", "params": {"out_features": 8}},
                       {"id": "fb", "op": "Linear", "params": {"out_features": 8}}, {"id": "sum", "op": "Add"}],
             "edges": [{"source": "a", "target": "fa"}, {"source": "b", "target": "fb"},
                       {"source": "fa", "target": "sum", "port": 0}, {"source": "fb", "target": "sum", "port": 1}],
             "output": "sum"}
    nodes = [{"id": "input", "op": "Input"}, {"id": "flat", "op": "Flatten"}, {"id": "use", "op": "late"},
             {"id": "deep1", "op": "Linear", "params": {"out_features": 16}}, {"id": "deep2", "op": "ReLU"},
             {"id": "head", "op": "Linear", "params": {"out_features": 10}}, {"id": "output", "op": "Output"}]
    edges = [("input", "flat", None), ("flat", "use", 0), ("flat", "deep1", None), ("deep1", "deep2", None),
             ("deep2", "use", 1), ("use", "head", None), ("head", "output", None)]
    doc = {"name": "late", "data": {"source": "sklearn:digits"},
           "model": {"blocks": [block], "nodes": nodes,
                     "edges": [{"source": a, "target": b, **({"port": p} if p is not None else {})}
                               for a, b, p in edges]}}
    model = generate(spec_from_dict(doc), framework).files["model.py"]
    body = model.split("class FlowTrainModel")[1]
    forward = body[body.index("def call" if framework == "keras" else "def forward"):]
    assert forward.index("deep2") < forward.index("self.use(")


def test_a_class_is_written_from_the_definition_through_nested_blocks() -> None:
    """One class for both uses: the bound width is an argument through the inner block, the input's
    channels another, and the literal kernel stays 3 although one use's width is 3."""
    model = generate(spec_from_dict(nested_spec()), "torch").files["model.py"]
    assert len(re.findall(r"^class Pair\(", model, re.M)) == 1 and "class Pair_2" not in model
    assert "def __init__(self, in_channels: int, width: int = 8) -> None:" in model
    assert "self.a__conv = nn.Conv2d(in_channels, width, kernel_size=(3, 3), padding=(1, 1))" in model
    assert "self.b__conv = nn.Conv2d(width, width, kernel_size=(3, 3), padding=(1, 1))" in model
    assert "self.b__bn = nn.BatchNorm2d(width)" in model
    assert "self.p1 = Pair(in_channels=1, width=3)" in model and "self.p2 = Pair(in_channels=3, width=6)" in model
    keras = generate(spec_from_dict(nested_spec()), "keras").files["model.py"]
    assert "kernel_initializer=torch_uniform(in_channels * 9)" in keras  # a fan-in: the input's channels × 3 × 3
    assert "kernel_initializer=torch_uniform(width * 9)" in keras


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_bound_flag_that_changes_the_code_gives_a_class_per_form(framework: str) -> None:
    """A bool cannot stand for an argument: uses with and without a bias are two classes, each
    written for its own value, never one class running the other's code."""
    block = {"name": "fc", "params": [{"name": "bias", "type": "bool", "default": True}],
             "nodes": [{"id": "lin", "op": "Linear", "params": {"out_features": 8, "bias": {"param": "bias"}}}],
             "edges": [{"source": "x", "target": "lin"}], "output": "lin"}
    doc = {"name": "flags", "data": {"source": "sklearn:digits"},
           "model": {"blocks": [block],
                     "nodes": [{"id": "input", "op": "Input"}, {"id": "flat", "op": "Flatten"},
                               {"id": "f1", "op": "fc"}, {"id": "f2", "op": "fc", "params": {"bias": False}},
                               {"id": "head", "op": "Linear", "params": {"out_features": 10}},
                               {"id": "output", "op": "Output"}],
                     "edges": [{"source": a, "target": b} for a, b in
                               [("input", "flat"), ("flat", "f1"), ("f1", "f2"), ("f2", "head"), ("head", "output")]]}}
    model = generate(spec_from_dict(doc), framework).files["model.py"]
    assert {"Fc", "Fc_2"} <= classes(model).keys()
    assert "self.f1 = Fc(in_features=64)" in model and "self.f2 = Fc_2(in_features=8)" in model


def test_a_forward_pass_reads_its_argument_and_a_size_written_out_splits_the_class() -> None:
    """torch reshapes to (groups, -1): one class, its forward reading self.groups. paddle writes the
    other size out (4 or 8 columns), so each use gets a class written for its own size."""
    torch_model = generate(spec_from_dict(regroup_spec()), "torch").files["model.py"]
    assert "x = x.reshape(x.shape[0], self.groups, -1)  # rs" in torch_model and "self.groups = groups" in torch_model
    assert "class Regroup_2" not in torch_model and "self.r2 = Regroup(in_features=16, groups=2)" in torch_model
    paddle_model = generate(spec_from_dict(regroup_spec()), "paddle").files["model.py"]
    assert "paddle.reshape(x, [-1, self.groups, 4])" in paddle_model
    assert "paddle.reshape(x, [-1, self.groups, 8])" in paddle_model and "self.r2 = Regroup_2(" in paddle_model
