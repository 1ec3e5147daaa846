"""The spec at the boundary: strict models, JSON Schema, versions and upgrades, hostile input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import zoo
from core.errors import SpecError
from core.load import load_spec, spec_from_dict, spec_from_json
from core.spec import SCHEMA_VERSION, PipelineSpec, json_schema
from core.upgrades import UpgradeRegistry


def doc() -> dict[str, Any]:
    return zoo.template("mlp").model_dump(mode="json")


def test_round_trip_through_json_keeps_the_spec_and_its_hash() -> None:
    spec = zoo.template("resnet18")
    again = spec_from_json(spec.to_json())
    assert again == spec
    assert again.spec_hash() == spec.spec_hash()


def test_positions_and_labels_do_not_change_the_hash() -> None:
    d = doc()
    h = spec_from_dict(d).spec_hash()
    d["model"]["nodes"][0]["position"] = {"x": 5, "y": 9}
    d["model"]["nodes"][0]["label"] = "the pixels"
    assert spec_from_dict(d).spec_hash() == h
    d["model"]["nodes"][2]["params"]["out_features"] = 256
    assert spec_from_dict(d).spec_hash() != h


@pytest.mark.parametrize("path, key", [
    ((), "colour"),
    (("data",), "batchsize"),
    (("training",), "learning_rate"),
    (("training", "optimizer"), "momentun"),
])
def test_unknown_keys_are_errors_with_their_location(path: tuple[str, ...], key: str) -> None:
    d = doc()
    target = d
    for p in path:
        target = target[p]
    target[key] = 1
    with pytest.raises(SpecError) as err:
        spec_from_dict(d)
    [problem] = err.value.problems
    assert problem.location == ".".join((*path, key)) and problem.message == "unknown key"


def test_every_structural_problem_is_reported() -> None:
    d = doc()
    d["data"]["batch_size"] = 0
    d["data"]["validation_split"] = 1.5
    d["training"]["optimizer"]["name"] = "lion"
    d["model"]["nodes"][1]["id"] = "bad id with spaces"
    with pytest.raises(SpecError) as err:
        spec_from_dict(d)
    where = {p.location for p in err.value.problems}
    assert {"data.batch_size", "data.validation_split", "training.optimizer.name"} <= where
    assert any(p.location.startswith("model.nodes[bad id with spaces]") for p in err.value.problems)


def test_splits_must_leave_training_data() -> None:
    d = doc()
    d["data"]["validation_split"] = 0.6
    d["data"]["test_split"] = 0.5
    with pytest.raises(SpecError, match="leaves no training data"):
        spec_from_dict(d)


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", '"spec"', "\udcff", "{" * 100_000])
def test_malformed_json_is_a_spec_error_not_a_traceback(text: str) -> None:
    with pytest.raises(SpecError):
        spec_from_json(text.encode("utf-8", "surrogateescape"))


def test_missing_and_directory_paths(tmp_path: Any) -> None:
    from core.errors import CommandError

    with pytest.raises(CommandError, match="no such file"):
        load_spec(tmp_path / "nope.json")
    with pytest.raises(CommandError, match="is a directory"):
        load_spec(tmp_path)


@pytest.mark.parametrize("hostile", [
    "a'b", 'a"b', "a\nb", "a\\b", "__import__('os').system('id')", "{{ 7*7 }}", "{% raw %}", "a\u2028b",
    "../../etc/passwd", "a/b", "ü", "",
])
def test_hostile_node_ids_are_refused_with_a_fix(hostile: str) -> None:
    d = doc()
    d["model"]["nodes"][1]["id"] = hostile
    with pytest.raises(SpecError) as err:
        spec_from_dict(d)
    assert any(p.fix and "letters, digits" in p.fix for p in err.value.problems)


def test_hostile_free_text_is_kept_verbatim() -> None:
    d = doc()
    d["description"] = "'''\n{{ x }}\u2028__import__('os')"
    d["model"]["nodes"][1]["label"] = '"; rm -rf /'
    spec = spec_from_dict(d)
    assert spec.description == d["description"]
    assert spec_from_json(spec.to_json()) == spec


def test_schema_describes_the_three_sections() -> None:
    schema = json_schema()
    assert {"data", "model", "training", "schema_version"} <= schema["properties"].keys()
    assert schema["additionalProperties"] is False
    json.dumps(schema)


def test_newer_schema_version_is_refused() -> None:
    d = doc()
    d["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SpecError, match="newer FlowTrain"):
        spec_from_dict(d)


def test_registered_upgrades_run_in_order_and_duplicates_are_refused() -> None:
    reg = UpgradeRegistry(current=3)

    @reg.register(1)
    def rename_layers(d: dict[str, Any]) -> dict[str, Any]:
        d["model"] = {"nodes": d.pop("layers"), "edges": d.pop("links")}
        return d

    @reg.register(2)
    def rename_bs(d: dict[str, Any]) -> dict[str, Any]:
        d["data"]["batch_size"] = d["data"].pop("batch")
        return d

    with pytest.raises(ValueError, match="already registered"):
        reg.register(1)(rename_layers)
    old = {"schema_version": 1, "layers": [{"id": "x"}], "links": [], "data": {"batch": 8}}
    new = reg.upgrade(old)
    assert new == {"schema_version": 3, "model": {"nodes": [{"id": "x"}], "edges": []}, "data": {"batch_size": 8}}
    assert old["schema_version"] == 1  # the caller's document is not modified

    with pytest.raises(SpecError, match="no upgrade is registered from version 0"):
        reg.upgrade({"schema_version": 0})


def test_defaults_fill_an_almost_empty_spec() -> None:
    spec = PipelineSpec.model_validate({})
    assert spec.training.framework == "auto" and spec.data.source == "sklearn:digits"


def test_non_finite_numbers_are_problems_naming_their_fields() -> None:
    """JSON's Infinity/NaN (which Python's json accepts) never reach validation or code generation."""
    text = zoo.template("mnist_cnn").to_json()
    doc = json.loads(text)
    doc["training"]["gradient_clip_norm"] = 1.0
    doc["model"]["nodes"][1]["params"]["negative_slope"] = 0.5
    text = json.dumps(doc).replace('"gradient_clip_norm": 1.0', '"gradient_clip_norm": Infinity')
    text = text.replace('"negative_slope": 0.5', '"negative_slope": NaN')
    with pytest.raises(SpecError) as err:
        spec_from_json(text)
    node = doc["model"]["nodes"][1]["id"]
    found = {(p.location, p.received, p.node) for p in err.value.problems}
    assert found == {("training.gradient_clip_norm", "Infinity", None),
                     (f"model.nodes[{node}].params.negative_slope", "NaN", node)}
    doc["training"]["optimizer"]["lr"] = float("-inf")  # a dict built in Python, e.g. by the editor
    with pytest.raises(SpecError, match=r"training.optimizer.lr: is not a finite number; received -inf"):
        spec_from_dict(doc)
    with pytest.raises(Exception, match="finite"):
        PipelineSpec.model_validate({**json.loads(zoo.template("mnist_cnn").to_json()),
                                     "training": {"gradient_clip_norm": float("nan")}})


# --------------------------------------------------------------------------- version 2: blocks

STORED_V1 = Path(__file__).parent / "data" / "spec_v1_digits_cnn.json"
# What version 1 of FlowTrain computed for that file: the upgrade must not change it, or the runs
# registered before the upgrade would no longer match their spec.
STORED_V1_HASH = "297148b82ef637e628c0db5f040a9ab63c7decbf577825eb1737f7c60a032af8"


def test_a_stored_version_1_file_loads_unchanged_and_keeps_its_hash() -> None:
    raw = json.loads(STORED_V1.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 1
    spec = load_spec(STORED_V1)
    assert spec.schema_version == SCHEMA_VERSION == 2
    assert spec.model.blocks == []
    assert spec.spec_hash() == STORED_V1_HASH
    assert spec == PipelineSpec.model_validate({**raw, "schema_version": 2})  # nothing else changed


def block_doc() -> dict[str, Any]:
    d = doc()
    d["model"]["blocks"] = [{
        "name": "dense_relu", "inputs": ["x"], "params": [{"name": "width", "type": "int", "default": 32}],
        "nodes": [{"id": "fc", "op": "Linear", "params": {"out_features": {"param": "width"}}},
                  {"id": "act", "op": "ReLU"}],
        "edges": [{"source": "x", "target": "fc"}, {"source": "fc", "target": "act"}],
        "output": "act",
    }]
    return d


def test_blocks_round_trip_and_enter_the_hash() -> None:
    d = block_doc()
    spec = spec_from_dict(d)
    assert spec.model.block("dense_relu") is not None and spec.model.block("Linear") is None
    assert spec_from_json(spec.to_json()) == spec
    without = spec_from_dict(doc()).spec_hash()
    assert spec.spec_hash() != without
    d["model"]["blocks"][0]["nodes"][0]["position"] = {"x": 3, "y": 4}
    assert spec_from_dict(d).spec_hash() == spec.spec_hash()  # positions inside blocks do not count
    d["model"]["blocks"][0]["params"][0]["default"] = 64
    assert spec_from_dict(d).spec_hash() != spec.spec_hash()


@pytest.mark.parametrize("field, value, where", [
    ("name", "has space", "model.blocks[has space].name"),
    ("name", "9lives", "model.blocks[9lives].name"),
    ("params", [{"name": "width", "type": "int", "default": "wide"}], "model.blocks[dense_relu].params[0]"),
    ("params", [{"name": "width", "type": "complex", "default": 1}], "model.blocks[dense_relu].params[0].type"),
    ("inputs", [], "model.blocks[dense_relu].inputs"),
    ("colour", "red", "model.blocks[dense_relu].colour"),
])
def test_malformed_blocks_are_refused_with_their_location(field: str, value: Any, where: str) -> None:
    d = block_doc()
    d["model"]["blocks"][0][field] = value
    with pytest.raises(SpecError) as err:
        spec_from_dict(d)
    assert any(p.location.startswith(where) for p in err.value.problems), err.value.problems


def test_schema_describes_blocks() -> None:
    schema = json_schema()
    assert "blocks" in schema["$defs"]["ModelSpec"]["properties"]
    assert {"name", "inputs", "params", "nodes", "edges", "output"} <= schema["$defs"]["BlockSpec"]["properties"].keys()
    assert "(schema_version 2)" in schema["title"]


def test_restarts_is_optional_enters_the_hash_when_set_and_is_checked() -> None:
    """``training.restarts`` came within version 2: unset, a spec hashes as before (the stored
    version-1 file above keeps its hash); set, it is part of what the run ran with."""
    d = doc()
    unset = spec_from_dict(d)
    assert unset.training.restarts is None
    d["training"]["restarts"] = 1
    assert spec_from_dict(d).spec_hash() != unset.spec_hash()
    for bad in (-1, 101, 2.5):
        d["training"]["restarts"] = bad
        with pytest.raises(SpecError) as caught:
            spec_from_dict(d)
        assert "training.restarts" in str(caught.value)
