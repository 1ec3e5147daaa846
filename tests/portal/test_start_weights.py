"""Imported starting weights in the editor: the training layer says which file and nodes; an edit that
changes a covered node's weights is a problem (never "Valid", never submitted with them) until the user
drops that node's weights (a copy of the file without them, the others kept) or all of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from portal import start_weights
from portal.editor_state import Editor
from portal.onnx_upload import import_onnx_upload
from portal.users import default_local_user
from settings import load_settings


def _two_layers() -> bytes:
    """x (1, 4) → fc1 (8) → Relu → fc2 (3): two covered nodes."""
    rng = np.random.default_rng(0)
    w1, w2 = (numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
              for n, s in (("w1", (8, 4)), ("w2", (3, 8))))
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="act"),
             helper.make_node("Gemm", ["r", "w2"], ["y"], name="fc2", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def _imported() -> tuple[Editor, str]:
    ed, raw = Editor(), _two_layers()
    assert import_onnx_upload(ed, "two.onnx", len(raw), lambda: raw, load_settings(), default_local_user())
    return ed, ed.doc["training"]["init_weights"]


def test_an_edited_node_asks_to_drop_its_weights_and_the_others_are_kept(portal_env: Path) -> None:
    ed, original = _imported()
    fit = start_weights.start_weights(ed)
    assert fit is not None and fit.misfits == {} and len(fit.covered) == 2 and ed.problems() == []
    assert start_weights.describe(fit).startswith(f"Starts from imported weights: {original} (")
    first = sorted(fit.covered)[0]
    ed.set_param(first, "out_features", 5)  # this node's weights, and the next one's inputs, change
    [problem] = ed.problems()
    assert problem.location == "training.init_weights" and "do not fit 2 node(s)" in problem.message
    ed.set_param(first, "out_features", 8)
    assert ed.problems() == []
    last = sorted(fit.covered)[1]
    ed.set_param(last, "bias", True)  # only the last node changes: a weight more
    [problem] = ed.problems()
    assert f"do not fit 1 node(s): {last}" in problem.message and "holds weight; the graph has bias, weight" in str(problem)
    start_weights.drop(ed, [last])
    assert ed.problems() == []
    kept = ed.doc["training"]["init_weights"]
    assert kept != original and Path(kept).parent == Path(original).parent
    with np.load(kept) as now, np.load(original) as before:
        assert sorted(now.files) == sorted(k for k in before.files if not k.startswith(f"{last}/"))
        for key in now.files:
            np.testing.assert_array_equal(now[key], before[key])
    [notice] = [n for n in ed.notices_in("graph") if n.topic == start_weights.TOPIC]
    assert f"Dropped the starting weights of {last}" in notice.text and "1 node(s) still start" in notice.text
    assert ed.undo() and ed.doc["training"]["init_weights"] == original  # undo brings them back

    ed.delete_node(first)  # the deleted node's weights no longer fit anything: drop them all
    assert "not a node with weights in the graph now" in str(ed.problems())
    start_weights.drop(ed, None)
    assert ed.doc["training"]["init_weights"] is None and start_weights.start_weights(ed) is None
    assert Path(original).is_file()  # the imported file stays (undo may bring it back)
