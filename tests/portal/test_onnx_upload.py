"""The editor's Import ONNX (AppTest on the real app.py): a published model uploaded to disk with the page's
ticket becomes the pipeline, its weights saved under the user's data root and named by
training.init_weights, the upload removed; a model that cannot be imported shows its problems and leaves
the pipeline alone; an oversize upload is refused unread."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from core.onnx_import import import_onnx
from portal import limits, upload_store
from portal.editor_state import Editor
from portal.onnx_upload import import_onnx_upload, import_ticket
from portal.param_text import md_text
from portal.upload_widget import TICKET_KEY
from portal.users import default_local_user
from settings import load_settings
from tests.onnx_models import gemm_model, published, with_external_weight, with_random_weights
from tests.portal.conftest import assert_no_exception, editor


def _upload(at, name: str, raw: bytes) -> str:
    """What the page's uploader does in the browser: the whole file to the upload route with the page's
    ticket, in pieces (tests/portal/test_upload_store.py tests the route; the browser test the page's part)."""
    token, folder = at.session_state[TICKET_KEY]
    ticket = upload_store.find(token)
    assert ticket.folder == Path(folder) and ticket.limit_bytes == load_settings().max_onnx_upload_mb * 2**20
    step = upload_store.PIECE_BYTES // 8
    for offset in range(0, len(raw), step):
        upload_store.write_piece(ticket, offset, [raw[offset:offset + step]], name, len(raw))
    assert ticket.complete and ticket.path.is_file()
    return token


def test_import_onnx_loads_the_model_and_starts_from_its_weights(app, portal_env: Path) -> None:
    at = app()
    model = with_random_weights(onnx.load(published("squeezenet")))
    raw = model.SerializeToString()
    token = _upload(at, "squeezenet.onnx", raw)
    assert import_ticket(editor(at), token, load_settings(), default_local_user())
    at.run()
    assert_no_exception(at)
    ed = editor(at)
    spec = ed.valid_spec()
    assert spec.name == "squeezenet" and len(spec.model.nodes) == len(import_onnx(model).spec.model.nodes)
    weights = Path(spec.training.init_weights or "")
    assert weights.parent == (portal_env / "data" / "imported").resolve() and weights.is_file()
    assert sorted(p.name for p in weights.parent.iterdir()) == [weights.name]  # the upload itself is removed
    with np.load(weights) as saved:
        assert sorted(saved.files) == sorted(import_onnx(model).weights)
    assert any("Imported " + md_text("squeezenet.onnx") in s.value for s in at.success)
    assert at.session_state[TICKET_KEY][0] != token  # a new upload gets a new ticket


def test_a_model_that_cannot_be_imported_shows_its_problems_and_keeps_the_pipeline(app, portal_env: Path) -> None:
    at = app()
    ed = editor(at)
    before = [n["id"] for n in ed.nodes]
    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"], name="gate")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    raw = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    assert not import_ticket(ed, _upload(at, "erf.onnx", raw), load_settings(), default_local_user())
    at.run()
    assert_no_exception(at)
    [error] = [e.value for e in at.error if "Could not import " + md_text("erf.onnx") in e.value]
    assert md_text("onnx.nodes[gate]: Erf (opset 13)") in error and "LRN" in error  # the supported ops are listed
    assert [n["id"] for n in editor(at).nodes] == before
    assert not (portal_env / "data" / "imported").exists() or not any((portal_env / "data" / "imported").iterdir())


def test_an_oversize_upload_is_refused_before_it_is_read(portal_env: Path) -> None:
    ed = Editor()

    def never_read() -> bytes:
        raise AssertionError("an oversize upload must be refused before it is read")

    settings = load_settings()
    size = settings.max_onnx_upload_mb * 2**20 + 1
    assert not import_onnx_upload(ed, "vgg.onnx", size, never_read, settings, default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error" and "at most 2,048 MB" in notice.text


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
    assert notice.level == "error" and "the weights folder is refused" in notice.text  # it leads outside the roots
    assert "outside your data roots" in notice.text and list(elsewhere.iterdir()) == []


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


def test_the_weights_go_to_the_folder_the_user_chose_inside_their_roots(portal_env: Path) -> None:
    from portal.onnx_upload import default_folder

    raw, user, settings = gemm_model().SerializeToString(), default_local_user(), load_settings()
    assert default_folder(user, settings) == str((portal_env / "data").resolve() / "imported")
    ed = Editor()
    assert import_onnx_upload(ed, "fc.onnx", len(raw), lambda: raw, settings, user, folder="models/fc")
    written = Path(ed.doc["training"]["init_weights"])
    assert written.parent == (portal_env / "data" / "models" / "fc").resolve() and written.is_file()
    [notice] = ed.notices_in("toolbar")
    assert f"written to {md_text(str(written))}" in notice.text
    outside = portal_env / "elsewhere"
    assert not import_onnx_upload(ed, "fc2.onnx", len(raw), lambda: raw, settings, user, folder=str(outside))
    [notice] = ed.notices_in("toolbar")
    assert "the weights folder is refused" in notice.text and "outside your data roots" in notice.text
    assert not outside.exists()


def test_a_50_mb_upload_shows_its_own_message_not_the_previous_ones(portal_env: Path) -> None:
    """Uploads up to the site's limit reach the import (it is the server's limit too, and the uploader's),
    so each one answers for itself: a 50 MB model on a site that allows 10 MB replaces the previous upload's
    error with its own, unread."""
    config = portal_env / "flowtrain.toml"
    config.write_text(config.read_text(encoding="utf-8") + "[portal]\nmax_onnx_upload_mb = 10\n", encoding="utf-8")
    ed, settings, user = Editor(), load_settings(), default_local_user()

    def never_read() -> bytes:
        raise AssertionError("an upload over the site's limit must be refused before it is read")

    assert not import_onnx_upload(ed, "first.onnx", 20 * 2**20, never_read, settings, user)
    assert not import_onnx_upload(ed, "big.onnx", 50 * 2**20, never_read, settings, user)
    [notice] = ed.notices_in("toolbar")  # the previous upload's error is gone
    assert notice.text.startswith("Could not import " + md_text("big.onnx") + ": it is 50.0 MB")
    assert "at most 10 MB" in notice.text
