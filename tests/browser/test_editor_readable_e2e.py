"""Readable at any size, in headless Debian chromium: an imported DenseNet-121 opens folded into blocks
(18 nodes, not 429), whole in view at a readable zoom, its zoom controls and minimap inside the canvas,
with the parameter count of the flat import. Every wait is a condition (tests/browser/ui.py)."""

from __future__ import annotations

import re

import pytest

from core.onnx_import import import_onnx
from core.validate import validate
from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import CANVAS, RUN_COUNTER, act, shot, wait_canvas, wait_node, wait_text
from tests.onnx_models import published

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}
FOLDED_NODES = 18
READABLE_PX = 8.5

# Every node, the zoom controls and the minimap lie inside the canvas' pane (the whole graph in view).
_INSIDE = """(sel) => {
  const doc = document.querySelector(sel).contentDocument;
  const pane = doc.querySelector('.react-flow').getBoundingClientRect();
  const inside = el => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.top >= pane.top - 1 && r.bottom <= pane.bottom + 1 && r.left >= pane.left - 1
      && r.right <= pane.right + 1; };
  const nodes = [...doc.querySelectorAll('.react-flow__node')];
  return {outside: nodes.filter(n => !inside(n)).map(n => n.getAttribute('data-id')),
          controls: !!doc.querySelector('.react-flow__controls') && inside(doc.querySelector('.react-flow__controls')),
          minimap: !!doc.querySelector('.react-flow__minimap') && inside(doc.querySelector('.react-flow__minimap'))};
}"""


def test_an_imported_densenet_opens_folded_whole_readable_and_with_its_parameters(portal, browser):
    model = published("densenet121")
    flat = validate(import_onnx(model, fold=False).spec)  # what the network is, unfolded
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers={USER_HEADER: "erin",
                                                                          SECRET_HEADER: PROXY_SECRET})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    uploader = page.locator('.ft-onnx-upload input[type="file"]')  # the editor's uploader (portal/upload_widget.py)
    act(page, lambda: uploader.set_input_files(str(model)), timeout=180_000)
    wait_text(page, re.compile(r"^Imported light_densenet121"), exact=False)
    view = wait_canvas(page, f"v.nodes === {FOLDED_NODES} && v.smallest_text_px < Infinity",
                       "the folded DenseNet on the canvas")
    wait_node(page, "dense_layer_x24", "dense_layer_x24")
    assert view["smallest_text_px"] >= READABLE_PX, view
    inside = page.evaluate(_INSIDE, CANVAS)
    assert inside == {"outside": [], "controls": True, "minimap": True}, inside
    # the same network: the flat import's layers and parameters
    wait_text(page, re.compile(rf"{len(flat.nodes)} nodes · {flat.total_params:,} parameters"), exact=False)
    page.locator(CANVAS).scroll_into_view_if_needed()
    shot(page, ARTIFACTS, "30-densenet121-folded")
    context.close()
