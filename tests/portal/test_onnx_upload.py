"""The editor's Import ONNX button (AppTest on the real app.py): a published model becomes the pipeline,
its weights saved under the user's data root and named by training.init_weights; a model that cannot
be imported shows its problems and leaves the pipeline alone; an oversize upload is refused unread."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from core.onnx_import import import_onnx
from portal import limits
from portal.editor_state import Editor
from portal.onnx_upload import import_onnx_upload
from portal.param_text import md_text
from portal.users import default_local_user
from settings import load_settings
from tests.onnx_models import gemm_model, published, with_external_weight, with_random_weights
from tests.portal.conftest import assert_no_exception, editor


def test_import_onnx_loads_the_model_and_starts_from_its_weights(app, portal_env: Path) -> None:
    at = app()
    model = with_random_weights(onnx.load(published("squeezenet")))
    raw = model.SerializeToString()
    at.file_uploader(key=f"toolbar.onnx.{editor(at).imports}").set_value(("squeezenet.onnx", raw,
                                                                          "application/octet-stream"))
    at.run()
    assert_no_exception(at)
    ed = editor(at)
    spec = ed.valid_spec()
    assert spec.name == "squeezenet" and len(spec.model.nodes) == len(import_onnx(model).spec.model.nodes)
    weights = Path(spec.training.init_weights or "")
    assert weights.parent == (portal_env / "data" / "imported").resolve() and weights.is_file()
    with np.load(weights) as saved:
        assert sorted(saved.files) == sorted(import_onnx(model).weights)
    assert any("Imported " + md_text("squeezenet.onnx") in s.value for s in at.success)


def test_a_model_that_cannot_be_imported_shows_its_problems_and_keeps_the_pipeline(app) -> None:
    at = app()
    ed = editor(at)
    before = [n["id"] for n in ed.nodes]
    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"], name="gate")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    raw = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    at.file_uploader(key=f"toolbar.onnx.{ed.imports}").set_value(("erf.onnx", raw, "application/octet-stream"))
    at.run()
    assert_no_exception(at)
    [error] = [e.value for e in at.error if "Could not import " + md_text("erf.onnx") in e.value]
    assert md_text("onnx.nodes[gate]: Erf (opset 13)") in error and "LRN" in error  # the supported ops are listed
    assert [n["id"] for n in editor(at).nodes] == before


def test_an_oversize_upload_is_refused_before_it_is_read(portal_env: Path) -> None:
    ed = Editor()

    def never_read() -> bytes:
        raise AssertionError("an oversize upload must be refused before it is read")

    size = limits.MAX_ONNX_UPLOAD_BYTES + 1
    assert not import_onnx_upload(ed, "vgg.onnx", size, never_read, load_settings(), default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error" and f"at most {limits.MAX_ONNX_UPLOAD_MB} MB" in notice.text


def test_the_models_own_text_is_shown_literally_never_as_markdown(portal_env: Path) -> None:
    """An op type and a node name are the model author's text: a link, an image or an HTML tag in them
    stays text in the notice (rendered Markdown would make them live)."""
    op, node = "[Erf](https://evil.example/x)", "<img src=x onerror=alert(1)>"
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name=node)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    raw = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    ed = Editor()
    assert not import_onnx_upload(ed, "[a](https://x.example).onnx", len(raw), lambda: raw, load_settings(),
                                  default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error"
    for live in (op, node, "](https://"):
        assert live not in notice.text, live
    assert not re.search(r"(?<!\\)[<\[]", notice.text), notice.text  # every < and [ escaped
    assert md_text(op) in notice.text and md_text(node) in notice.text


def test_an_upload_whose_weight_points_at_a_portal_file_is_refused_and_nothing_is_written(
        portal_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The portal runs in its checkout, where the default home keeps every user's registry."""
    (portal_env / "var").mkdir()
    (portal_env / "var" / "flowtrain.db").write_bytes(b"every user's runs 0123456789abcdefghijklmn")
    monkeypatch.chdir(portal_env)
    raw = with_external_weight(gemm_model(), "var/flowtrain.db").SerializeToString()
    ed = Editor()
    assert not import_onnx_upload(ed, "thief.onnx", len(raw), lambda: raw, load_settings(), default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error" and md_text("onnx.initializers[w]") in notice.text and "external file" in notice.text
    assert not (portal_env / "data" / "imported").exists() or not any((portal_env / "data" / "imported").iterdir())


def test_weights_are_not_written_through_a_symlinked_imported_folder(portal_env: Path) -> None:
    elsewhere = portal_env / "portal-owned"
    elsewhere.mkdir()
    (portal_env / "data" / "imported").symlink_to(elsewhere)
    raw = gemm_model().SerializeToString()
    ed = Editor()
    assert not import_onnx_upload(ed, "fc.onnx", len(raw), lambda: raw, load_settings(), default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error" and "not a plain folder" in notice.text
    assert list(elsewhere.iterdir()) == []


def test_one_onnx_import_per_user_and_a_few_in_all(portal_env: Path) -> None:
    raw = gemm_model().SerializeToString()
    user = default_local_user()
    with limits.GATE.hold("onnx_import", user):
        ed = Editor()
        assert not import_onnx_upload(ed, "fc.onnx", len(raw), lambda: raw, load_settings(), user)
        assert "An ONNX import of yours is already running" in ed.notices_in("toolbar")[0].text
    others = [f"other{i}" for i in range(limits.AT_ONCE["onnx_import"])]
    with contextlib.ExitStack() as stack:
        for other in others:
            stack.enter_context(limits.GATE.hold("onnx_import", other))
        ed = Editor()
        assert not import_onnx_upload(ed, "fc.onnx", len(raw), lambda: raw, load_settings(), user)
        assert "the most at once" in ed.notices_in("toolbar")[0].text
    ed = Editor()
    assert import_onnx_upload(ed, "fc.onnx", len(raw), lambda: raw, load_settings(), user)  # free again
