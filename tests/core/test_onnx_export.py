"""The ONNX exporter without any framework: every op has exactly one exporter; every case of the op
catalogue exports to a model that onnx's full checker accepts (its shape inference agrees with
FlowTrain's) and onnxruntime runs to the shape the spec infers; refusals name the node, the op or
the weight at fault, all at once. Matching the frameworks' outputs: tests/frameworks/test_onnx_export.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import core.onnx_export as onnx_export
from core.equivalence import random_inputs
from core.onnx_export import EXPORTERS, OPSET, ExporterRegistry, ExportError, export_onnx, save_onnx
from core.onnx_export.pool import averaging_matrix
from core.ops import REGISTRY
from core.validate import validate
from core.weights import canonical_shapes, random_canonical
from tests.op_cases import BY_NAME, CASES, OpCase, flatten_linear_spec, one_op_spec


def run(model: onnx.ModelProto | str, x: np.ndarray) -> np.ndarray:
    source = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(["output"], {"input": x})[0]


def test_every_op_of_the_catalogue_has_an_exporter() -> None:
    assert sorted(EXPORTERS.exporters) == REGISTRY.names()


def test_a_second_exporter_for_an_op_and_one_for_an_unknown_op_are_refused() -> None:
    with pytest.raises(ValueError, match="'ReLU' already has an exporter .*one_to_one"):
        EXPORTERS.register("ReLU")(lambda ctx: "x")
    with pytest.raises(ValueError, match="unknown op 'Frobnicate'"):
        EXPORTERS.register("Frobnicate")(lambda ctx: "x")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_op_case_exports_a_valid_model_onnxruntime_runs(case: OpCase) -> None:
    spec = case.spec()
    analysis = validate(spec)
    model = export_onnx(spec, random_canonical(analysis), analysis=analysis)
    onnx.checker.check_model(model, full_check=True)  # strict shape inference: its shapes are ours
    assert [o.domain or "" for o in model.opset_import] == [""] and model.opset_import[0].version == OPSET
    x = random_inputs(analysis, 3)
    y = run(model, x)
    assert y.shape == (3, *analysis.nodes["output"].output.shape) and np.all(np.isfinite(y))


def test_canonical_weights_are_the_initialisers_of_their_own_name() -> None:
    """A weight ONNX takes in torch's layout keeps its canonical key and its exact values."""
    spec = flatten_linear_spec()
    analysis = validate(spec)
    weights = random_canonical(analysis, seed=3)
    stored = {t.name: numpy_helper.to_array(t) for t in export_onnx(spec, weights).graph.initializer}
    for key in ("conv/weight", "conv/bias", "fc/weight", "fc/bias"):
        np.testing.assert_array_equal(stored[key], weights[key])


def test_the_graph_has_a_batch_axis_and_the_drawings_layout() -> None:
    spec = one_op_spec("conv", "Conv2d", (3, 9, 9), {"out_channels": 4, "kernel_size": 3})
    model = export_onnx(spec, random_canonical(validate(spec)))
    [inp], [out] = model.graph.input, model.graph.output
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (inp, out)]
    assert (inp.name, out.name, dims) == ("input", "output", [["batch", 3, 9, 9], ["batch", 4, 7, 7]])
    assert run(model, np.zeros((5, 3, 9, 9), np.float32)).shape == (5, 4, 7, 7)


def test_token_ids_enter_as_int64() -> None:
    case = BY_NAME["Embedding"]
    model = export_onnx(case.spec(), random_canonical(validate(case.spec())))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64


def test_export_is_deterministic() -> None:
    spec = BY_NAME["TransformerEncoderLayer"].spec()
    weights = random_canonical(validate(spec))
    assert export_onnx(spec, weights).SerializeToString() == export_onnx(spec, weights).SerializeToString()


def test_an_op_without_an_exporter_is_refused_naming_the_op_and_the_node() -> None:
    partial = ExporterRegistry()
    partial.functions = {op: fn for op, fn in EXPORTERS.exporters.items() if op not in ("Conv2d", "Linear")}
    spec = flatten_linear_spec()
    with pytest.raises(ExportError) as err:
        export_onnx(spec, random_canonical(validate(spec)), registry=partial)
    assert [(p.node, p.received) for p in err.value.problems] == [("conv", "Conv2d"), ("fc", "Linear")]
    assert "model.nodes[conv]: cannot be exported to ONNX: no exporter for Conv2d" in str(err.value)


def test_weights_that_do_not_fit_are_refused_all_at_once() -> None:
    spec = flatten_linear_spec()
    weights = random_canonical(validate(spec))
    del weights["fc/bias"]
    weights["conv/weight"] = weights["conv/weight"][:2]
    weights["conv/bias"] = weights["conv/bias"].astype(np.int64)
    weights["other/weight"] = np.zeros(3, np.float32)
    with pytest.raises(ExportError) as err:
        export_onnx(spec, weights)
    found = {p.location: p for p in err.value.problems}
    assert set(found) == {"weights[conv/weight]", "weights[conv/bias]", "weights[fc/bias]", "weights"}
    assert found["weights[conv/weight]"].received == "float32 (2, 2, 3, 3)"
    assert found["weights[fc/bias]"].message == "is missing" and found["weights[fc/bias]"].node == "fc"
    assert found["weights"].received == "other/weight"
    assert err.value.exit_code == 2


def test_adaptive_pool_windows_are_torchs() -> None:
    """Window i of an axis of n into k spans [⌊i·n/k⌋, ⌈(i+1)·n/k⌉): overlapping when k does not divide n."""
    matrix = averaging_matrix(7, 3)
    spans = [tuple(np.flatnonzero(row)) for row in matrix]
    assert spans == [(0, 1, 2), (2, 3, 4), (4, 5, 6)]
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-6)


def test_saving_checks_and_writes_atomically(tmp_path: Path) -> None:
    spec = flatten_linear_spec()
    model = export_onnx(spec, random_canonical(validate(spec)))
    path = save_onnx(model, tmp_path / "sub" / "model.onnx")
    assert path.read_bytes() == model.SerializeToString()
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx"]


def test_large_weights_go_to_a_data_file_beside_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Protobuf stops at 2 GiB: from EXTERNAL_DATA_BYTES on, the weights are written to <name>.data."""
    monkeypatch.setattr(onnx_export, "EXTERNAL_DATA_BYTES", 1000)
    spec = flatten_linear_spec()
    analysis = validate(spec)
    model = export_onnx(spec, random_canonical(analysis), analysis=analysis)
    x = random_inputs(analysis, 2)
    expected = run(model, x)
    path = save_onnx(model, tmp_path / "model.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    header = onnx.load(str(path), load_external_data=False)
    assert {t.name for t in header.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL} >= {
        "fc/weight"}
    np.testing.assert_array_equal(run(str(path), x), expected)


def test_every_weight_of_every_case_reaches_the_model() -> None:
    """No canonical weight is dropped: each one's values appear among the initialisers (maybe
    transposed, reordered or reshaped, so compared as sorted multisets)."""
    for case in CASES:
        spec = case.spec()
        analysis = validate(spec)
        weights = random_canonical(analysis)
        stored = [numpy_helper.to_array(t) for t in export_onnx(spec, weights, analysis=analysis).graph.initializer]
        pool = np.sort(np.concatenate([a.ravel() for a in stored if a.dtype == np.float32] or [np.zeros(0)]))
        for key in canonical_shapes(analysis):
            values = weights[key].ravel()
            found = np.searchsorted(pool, values)
            hit = (found < pool.size) & (pool[np.minimum(found, pool.size - 1)] == values)
            assert hit.all(), f"{case.name}: {key} is not in the exported model"


def test_docs_name_the_onnx_operators_of_every_op() -> None:
    """docs/onnx.md's table has a row for every op with an exporter of its own, and none for an op
    without one; the ops that are one ONNX operator are in the generated support table instead."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "onnx.md").read_text(encoding="utf-8")
    table = text.split("\n## Ops\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    documented = {op.strip() for row in rows[1:] for op in row.split(",")}
    one_to_one = {name for name in REGISTRY.names() if REGISTRY.get(name).onnx is not None}
    assert documented == set(EXPORTERS.exporters) - one_to_one and {"ReLU", "LeakyReLU"} <= one_to_one
