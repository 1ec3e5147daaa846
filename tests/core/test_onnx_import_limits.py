"""What an ONNX import may reach and spend (core/onnx_import/_load.py, _fold.py): external data only from
the model file's own folder, never for bytes (an upload) or the working folder; constants folded only
within a budget whose breach names the node; control flow and huge graphs refused before the walk."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from core.errors import FlowTrainError, SpecError
from core.onnx_import import FoldBudget, import_onnx
from core.onnx_import._load import MAX_ONNX_NODES
from core.onnx_import.bounded import import_bounded
from tests.onnx_models import gemm_model, with_external_weight

SECRET = b"registry-password-0123456789abcdefghijklmnop"


def test_an_upload_whose_weight_points_at_a_file_in_the_working_folder_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "flowtrain.db").write_bytes(SECRET)
    monkeypatch.chdir(tmp_path)  # the portal's working folder: the checkout with every user's registry
    raw = with_external_weight(gemm_model(), "var/flowtrain.db").SerializeToString()
    for source in (raw, onnx.load_from_string(raw)):  # an upload, and a ModelProto with no folder of its own
        with pytest.raises(SpecError) as err:
            import_onnx(source)
        [problem] = err.value.problems
        assert problem.location == "onnx.initializers[w]" and "external file" in problem.message
        assert "var/flowtrain.db" in problem.received and "import-onnx" in problem.fix


def test_a_model_file_reads_external_data_from_its_own_folder_only(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    work, models = tmp_path / "work", tmp_path / "models"
    work.mkdir()
    models.mkdir()
    (work / "secret.db").write_bytes(SECRET)
    (models / "link.bin").symlink_to(work / "secret.db")
    (models / "sub").symlink_to(work)
    monkeypatch.chdir(work)
    for location in ("secret.db", "../work/secret.db", str(work / "secret.db"), "link.bin", "sub/secret.db"):
        onnx.save(with_external_weight(gemm_model(), location), str(models / "m.onnx"))
        with pytest.raises(SpecError) as err:
            import_onnx(models / "m.onnx")
        [problem] = err.value.problems
        assert problem.location == "onnx.initializers[w]", location
        assert repr(location) in problem.received and str(models) in problem.expected, location


def test_a_legitimate_external_data_model_imports_beside_its_data_file(tmp_path: Path) -> None:
    weight = np.arange(8, dtype=np.float32).reshape(2, 4)
    onnx.save_model(gemm_model(weight), str(tmp_path / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    assert (tmp_path / "m.data").stat().st_size == weight.nbytes
    [got] = import_onnx(tmp_path / "m.onnx").weights.values()
    assert np.array_equal(got, weight)
    short = tmp_path / "short"
    short.mkdir()
    (short / "m.data").write_bytes(weight.tobytes()[:16])  # fewer bytes than the tensor's dims need
    (short / "m.onnx").write_bytes((tmp_path / "m.onnx").read_bytes())
    with pytest.raises(SpecError, match=r"onnx.initializers\[w\]: its external data"):
        import_onnx(short / "m.onnx")
    onnx.save(with_external_weight(gemm_model(), "m.data", offset=-5), str(short / "m.onnx"))
    with pytest.raises(SpecError, match=r"onnx.initializers\[w\]: its external data entry is malformed"):
        import_onnx(short / "m.onnx")


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], opset: int = 13) -> onnx.ModelProto:
    """x (1, 4) → nodes → Add with the last node's constant → y."""
    last = nodes[-1].output[0]
    graph = helper.make_graph(
        [*nodes, helper.make_node("Add", ["x", last], ["y"], name="use")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("op, inputs, inits", [
    ("ConstantOfShape", ["shape"], {"shape": np.array([1, 2**31], np.int64)}),
    ("Expand", ["one", "shape"], {"one": np.ones(1, np.float32), "shape": np.array([2**16, 2**16], np.int64)}),
    ("Tile", ["row", "reps"], {"row": np.ones((1, 4), np.float32), "reps": np.array([2**30, 1], np.int64)}),
    ("Range", ["a", "b", "d"], {"a": np.array(0.0, np.float32), "b": np.array(1e12, np.float32),
                                "d": np.array(1.0, np.float32)}),
    ("Mul", ["col", "row"], {"col": np.ones((2**15, 1), np.float32), "row": np.ones((1, 2**15), np.float32)}),
])
def test_a_tiny_model_asking_for_a_huge_constant_is_refused_before_it_is_computed(
        op: str, inputs: list[str], inits: dict[str, np.ndarray]) -> None:
    model = _model([helper.make_node(op, inputs, ["big"], name="bomb")], inits)
    start = time.perf_counter()
    with pytest.raises(SpecError) as err:
        import_onnx(model.SerializeToString())
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[bomb]" and f"{op} (opset 13)" in problem.message
    assert "elements" in problem.message and f"at most {FoldBudget().max_elements:,}" in problem.expected
    assert time.perf_counter() - start < 5  # refused from the declared sizes, nothing allocated


def test_constant_loop_is_refused_as_control_flow_before_anything_runs() -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc", "acc"], ["acc2"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc2", TensorProto.FLOAT, [4])])
    loop = helper.make_node("Loop", ["trips", "cond", "init"], ["out"], name="forever", body=body)
    model = _model([loop], {"trips": np.array(10**15, np.int64), "cond": np.array(True),
                            "init": np.ones(4, np.float32)})
    with pytest.raises(SpecError) as err:
        import_onnx(model.SerializeToString())
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[forever]" and "control flow" in problem.message


def test_folding_stops_when_the_models_budget_is_spent_naming_the_node() -> None:
    nodes = [helper.make_node("ConstantOfShape", ["shape"], [f"c{i}"], name=f"fill{i}") for i in range(4)]
    nodes.append(helper.make_node("Sum", [f"c{i}" for i in range(4)], ["all"], name="sum"))
    model = _model(nodes, {"shape": np.array([1, 4], np.int64)})
    assert import_onnx(model).spec.model.nodes  # well within the default budget
    with pytest.raises(SpecError) as err:  # each fill is 16 bytes of float32: the third passes 40
        import_onnx(model, budget=FoldBudget(max_total_bytes=40))
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[fill2]" and "at most 40 bytes" in problem.expected
    with pytest.raises(SpecError) as err:  # no time at all: the first fold spends it
        import_onnx(model, budget=FoldBudget(max_seconds=0))
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[fill0]" and "at most 0 s" in problem.expected


def test_an_op_outside_shape_and_weight_arithmetic_is_not_folded() -> None:
    nodes = [helper.make_node("Einsum", ["a", "a"], ["outer"], name="outer", equation="i,j->ij")]
    with pytest.raises(SpecError) as err:
        import_onnx(_model(nodes, {"a": np.ones(4, np.float32)}, opset=13))
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes[outer]" and "folds only shape and weight arithmetic" in problem.message
    nodes = [helper.make_node("Cast", ["a"], ["text"], name="words", to=TensorProto.STRING)]
    with pytest.raises(SpecError, match=r"onnx.nodes\[words\]: Cast \(opset 13\): casts constants to strings"):
        import_onnx(_model(nodes, {"a": np.ones(4, np.float32)}))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_a_million_node_model_is_refused_by_its_node_count_before_it_is_parsed() -> None:
    """The graph's nodes are appended as raw protobuf (the wire format merges them into the graph), and the
    file ends in bytes no parser accepts: the refusal comes from the count, read before any parsing."""
    node = helper.make_node("Relu", ["x"], ["y"]).SerializeToString()
    nodes = (b"\x0a" + _varint(len(node)) + node) * 10**6
    raw = gemm_model().SerializeToString() + b"\x3a" + _varint(len(nodes)) + nodes + b"\xff\xff\xff"
    with pytest.raises(SpecError) as err:
        import_onnx(raw)
    [problem] = err.value.problems
    assert problem.location == "onnx.nodes" and f"more than {MAX_ONNX_NODES:,} nodes" in problem.message


def test_the_portals_import_runs_in_a_subprocess_bounded_in_memory_and_time() -> None:
    """Six 128 MiB constants fit the command line's folding budget, not a 640 MiB address space."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], [f"c{i}"], name=f"fill{i}") for i in range(6)]
    nodes.append(helper.make_node("Sum", [f"c{i}" for i in range(6)], ["all"], name="sum"))
    raw = _model(nodes, {"shape": np.array([1, 2**25], np.int64)}).SerializeToString()
    with pytest.raises(FlowTrainError, match="MemoryError|memory"):
        import_bounded(raw, "hog", memory_bytes=640 * 2**20)
    with pytest.raises(FlowTrainError, match="did not finish within 0.01 s"):
        import_bounded(gemm_model().SerializeToString(), "fc", timeout=0.01)
    result = import_bounded(gemm_model().SerializeToString(), "fc")
    assert result.spec.name == "fc" and result.weights["fc/weight"].shape == (2, 4)
