"""Imported weights in a real browser (headless Debian chromium): a model larger than Streamlit's uploader
takes goes to disk in pieces, with progress and Cancel, and a wrong file says why; an imported model says
on the training layer which weights it starts from; editing a covered node asks to drop that node's
weights, and after one click the run completes with the other nodes' imported weights. One run of one
epoch on iris (the compare table is covered without a browser: tests/portal/test_runs_page.py,
test_run_compare.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import RUN_COUNTER, act, choose, click_button, click_node, set_number, shot, wait_node, wait_text

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}
RUN_TIMEOUT_MS = 420_000


def _three_layers() -> bytes:
    """x (1, 4) → fc1 (8) → Relu → fc2 (8) → Relu → fc3 (3): iris-shaped, three covered nodes."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (8, 4)), ("w2", (8, 8)), ("w3", (3, 8)))]
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h1"], name="fc1", transB=1),
             helper.make_node("Relu", ["h1"], ["r1"], name="act1"),
             helper.make_node("Gemm", ["r1", "w2"], ["h2"], name="fc2", transB=1),
             helper.make_node("Relu", ["h2"], ["r2"], name="act2"),
             helper.make_node("Gemm", ["r2", "w3"], ["y"], name="fc3", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def _page(browser, user: str):
    headers = {USER_HEADER: user, SECRET_HEADER: PROXY_SECRET}
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers=headers)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    return context, page


def _submit(page) -> str:
    act(page, page.get_by_role("button", name="Submit run").click, timeout=300_000)
    label = wait_text(page, re.compile(r"^Submitted run \S+: \w+ on local")).inner_text()
    return re.search(r"Submitted run (\S+):", label).group(1)


def test_an_edited_imported_node_drops_its_weights_and_the_run_completes(portal, browser):
    context, page = _page(browser, "ines")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    uploader = page.locator('.ft-onnx-upload input[type="file"]')
    raw = _three_layers()
    act(page, lambda: uploader.set_input_files(files=[{"name": "three.onnx", "mimeType": "application/octet-stream",
                                                        "buffer": raw}]), timeout=120_000)
    wait_text(page, re.compile(r"^Imported three\.onnx: \d+ nodes, starting from its weights, written to "))
    wait_text(page, re.compile(r"^Starts from imported weights: .*three-\w+\.weights\.npz \(0\.0 MB\), covering 3 "
                               r"node\(s\): fc1, fc2, fc3\.$"))
    # iris: 4 features, 3 classes, built in
    act(page, page.locator('[data-testid="stRadio"]').get_by_text("Built-in dataset", exact=True).click)
    choose(page, "Built-in dataset", "sklearn:iris")
    set_number(page, "Epochs", 1)

    click_node(page, "fc2")
    set_number(page, "out_features", 16)  # fc2's weights and fc3's inputs change
    wait_text(page, re.compile(r"^The imported starting weights of fc2, fc3 no longer fit the graph"))
    shot(page, ARTIFACTS, "30-imported-weights-misfit")
    click_button(page, re.compile(r"^Drop the weights of 2 node"))
    wait_text(page, re.compile(r"^Dropped the starting weights of fc2, fc3 \(they no longer fit\): .*1 node\(s\) "
                               r"still start from the imported weights"))
    wait_text(page, re.compile(r"^Starts from imported weights: .*covering 1 node\(s\): fc1\.$"))
    wait_text(page, re.compile(r"^Valid: .* Fits local"))
    act(page, page.get_by_role("link", name="Runs").click)
    run_id = _submit(page)
    wait_text(page, re.compile(rf"Run {re.escape(run_id)} — COMPLETED"), timeout=RUN_TIMEOUT_MS)
    shot(page, ARTIFACTS, "31-edited-import-run-completed")
    context.close()


def _wide(path: Path) -> Path:
    """x (1, 1024) → wide (8000) → Relu → head (3): a real model of 31.3 MB, most of it one initializer
    (more than Streamlit's uploader takes, .streamlit/config.toml)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8000, 1024), dtype=np.float32) * 0.03, "w1"),
             numpy_helper.from_array(rng.standard_normal((3, 8000), dtype=np.float32) * 0.01, "w2")]
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h1"], name="wide", transB=1),
             helper.make_node("Relu", ["h1"], ["r1"], name="act"),
             helper.make_node("Gemm", ["r1", "w2"], ["y"], name="head", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_a_large_model_is_uploaded_to_disk_in_pieces_with_progress_and_cancel(portal, browser, tmp_path):
    context, page = _page(browser, "uma")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    uploader = page.locator('.ft-onnx-upload input[type="file"]')
    folder = portal.data / "imported"
    # refused at once, each with its own message (the browser checks the name, the portal the content)
    uploader.set_input_files(files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}])
    wait_text(page, "Could not import notes.txt: it is not an ONNX model; choose a file ending in .onnx.")
    uploader.set_input_files(files=[{"name": "renamed.onnx", "mimeType": "application/octet-stream",
                                     "buffer": b"PK\x03\x04" + bytes(4096)}])
    wait_text(page, re.compile(r"^Could not import renamed\.onnx: 'renamed\.onnx' is not an ONNX model \(it does not "
                               r"start like one\)"))
    wide = _wide(tmp_path / "wide.onnx")
    size_mb = f"{wide.stat().st_size / 2**20:.1f} MB"
    # a slow link: the progress shows, Cancel stops the upload and nothing of it stays on disk
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                  "uploadThroughput": 4 * 2**20})
    uploader.set_input_files(wide)
    wait_text(page, re.compile(rf"^Uploading wide\.onnx: (8|16|24)\.0 MB of {size_mb}$"))
    assert page.locator(".ft-onnx-upload progress").is_visible()
    page.get_by_role("button", name="Cancel upload").click()
    wait_text(page, "The upload of wide.onnx was cancelled; nothing of it was kept.")
    assert not folder.exists() or [p.name for p in folder.iterdir() if p.name.startswith(".flowtrain-upload-")] == []
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                  "uploadThroughput": -1})
    act(page, lambda: uploader.set_input_files(wide), timeout=120_000)
    done = wait_text(page, re.compile(rf"^Uploaded wide\.onnx \({size_mb}\) in [\d.]+ s\.$")).inner_text()
    notice = wait_text(page, re.compile(r"^Imported wide\.onnx: 5 nodes, starting from its weights, written to "
                                        r"\S+/imported/wide-\w+\.weights\.npz \(31\.3 MB\)\.")).inner_text()
    shot(page, ARTIFACTS, "32-large-onnx-uploaded")
    print(f"{done} | {notice}")
    mine = [p.name for p in folder.iterdir() if p.name.startswith(("wide", ".flowtrain-upload-"))]
    assert mine == [re.search(r"(wide-\w+\.weights\.npz)", notice).group(1)]  # the upload itself is removed
    wait_text(page, re.compile(r"^Starts from imported weights: .*wide-\w+\.weights\.npz \(31\.3 MB\), covering 2 "
                               r"node\(s\): (head, wide|wide, head)\.$"))
    context.close()
