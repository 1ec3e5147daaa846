"""Bad input reaches the page as a named problem, never a traceback (issue 20, item 10): each case through the
function the page calls; and what does escape as an unexpected error shows no details to the user
(``.streamlit/config.toml`` ``client.showErrorDetails = "none"``; Streamlit logs the full error for the
administrator)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
import streamlit.config
from onnx import numpy_helper
from streamlit.testing.v1 import AppTest

from core import zoo
from portal.data_view import probe_source
from portal.editor_state import Editor
from portal.editor_view import import_spec
from portal.onnx_upload import import_onnx_upload
from portal.param_text import md_text
from portal.users import default_local_user
from settings import load_settings
from tests.onnx_models import gemm_model

ROOT = Path(__file__).resolve().parents[2]


def _import(text: str) -> str:
    ed = Editor()
    raw = text.encode()
    assert not import_spec(ed, "spec.json", len(raw), lambda: raw, load_settings(), default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert notice.level == "error"
    return notice.text


def test_a_5001_digit_integer_is_a_problem_naming_its_field(portal_env: Path) -> None:
    doc = json.loads((ROOT / "examples" / "digits_cnn.json").read_text())
    doc["data"]["batch_size"] = 12345
    text = _import(json.dumps(doc).replace("12345", "9" * 5001))
    assert "data.batch_size: is an integer of 5,001 digits" in text and "at most 100 digits" in text


def test_a_block_parameter_named_like_a_python_keyword_is_a_problem(portal_env: Path) -> None:
    doc = zoo.template("resnet18_cifar").model_dump(mode="json")
    for bad in ("None", "class"):
        text = _import(json.dumps(doc).replace('"channels"', json.dumps(bad)))
        assert "model.blocks[basic_block].params[0].name" in text and f"{bad!r} is a Python keyword" in text


def test_an_onnx_weight_whose_data_does_not_fit_its_dims_is_a_problem(portal_env: Path) -> None:
    model = gemm_model()
    del model.graph.initializer[:]
    bad = numpy_helper.from_array(np.ones(8, np.float32), "w")
    bad.dims[:] = [3, 4]  # 8 numbers declared as 12
    model.graph.initializer.append(bad)
    raw = model.SerializeToString()
    ed = Editor()
    assert not import_onnx_upload(ed, "bad.onnx", len(raw), lambda: raw, load_settings(), default_local_user())
    [notice] = ed.notices_in("toolbar")
    assert md_text("onnx.initializers[w]: cannot be read") in notice.text and md_text("dims [3, 4]") in notice.text


def test_a_300_character_data_path_is_a_probe_message(portal_env: Path) -> None:
    ed = Editor()
    ed.set_field("data", ("source",), "d" * 300 + ".csv")
    probe_source(ed, load_settings(), default_local_user())
    level, text = st.session_state["editor.probe"]
    assert level == "error" and "a file or folder name has at most 255 bytes" in text


def test_an_unexpected_error_shows_no_details_on_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # where the portal starts (scripts/portal.sh), reading .streamlit/config.toml
    streamlit.config.get_config_options(force_reparse=True)
    at = AppTest.from_string("raise ValueError('the database password is hunter2')")
    at.run()
    [shown] = at.exception
    assert "hunter2" not in shown.message and not shown.stack_trace and "redacted" in shown.message
