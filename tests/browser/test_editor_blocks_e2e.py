"""Composite blocks in headless Debian chromium: resnet18_cifar is drawn with blocks (a few readable
nodes), a block opens on the canvas, an inner parameter edited there changes every use of the
block in the exported spec, and "Back to pipeline" returns. Every wait is a condition
(tests/browser/ui.py); screenshots go to test-artifacts/browser/."""

from __future__ import annotations

import json
import re

import pytest

from core import zoo
from core.block_expansion import expand
from core.load import spec_from_json
from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import (
    RUN_COUNTER,
    canvas_view,
    choose,
    click_button,
    click_node,
    set_number,
    settled,
    shot,
    wait_canvas,
    wait_gone,
    wait_node,
    wait_text,
)

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}
READABLE_PX = 10
BLOCK = "basic_block"


def _page(browser):
    headers = {USER_HEADER: "dana", SECRET_HEADER: PROXY_SECRET}  # as the sign-in proxy sends it
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers=headers, accept_downloads=True)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    return context, page


def _export(page) -> dict:
    settled(page)
    with page.expect_download() as info:
        page.get_by_role("button", name="Export spec (JSON)").click()
    return json.loads(open(info.value.path(), encoding="utf-8").read())


def test_a_block_opened_and_edited_in_the_browser_changes_every_use(portal, browser):
    template = zoo.template("resnet18_cifar")
    uses = [n.id for n in template.model.nodes if n.op == BLOCK]
    others = [n.id for n in template.model.nodes if n.op != BLOCK and template.model.block(n.op)]
    assert len(uses) >= 2 and others  # the block is used several times, and another block too
    block = template.model.block(BLOCK)
    bound = next(x.id for x in block.nodes if x.params.get("out_channels") == {"param": "channels"})
    norm = next(x.id for x in block.nodes if x.op == "BatchNorm2d")

    context, page = _page(browser)
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    choose(page, "Template from the model zoo", re.compile(r"^resnet18_cifar — "))
    click_button(page, "Load template")
    wait_node(page, uses[0], f"▣ {BLOCK}")
    # a few nodes, each block use one of them, readable at the fitted zoom
    n = len(template.model.nodes)
    view = wait_canvas(page, f"v.nodes === {n} && v.smallest_text_px < Infinity", "the canvas fitted to resnet18_cifar")
    assert n <= 20 and view["smallest_text_px"] >= READABLE_PX, view
    shot(page, ARTIFACTS, "20-blocks-resnet18-cifar")

    # open the block from a selected use: its own subgraph, the input port and the output marked
    click_node(page, uses[0])
    wait_text(page, "channels")  # the use's side form: its block parameter
    shot(page, ARTIFACTS, "21-block-use-selected")
    click_button(page, f"Open block {BLOCK}")
    wait_node(page, block.inputs[0], "input port")
    wait_node(page, block.output, "output of the block")
    wait_text(page, f"Editing the block Pipeline › {BLOCK}")
    inside = canvas_view(page)
    assert inside["nodes"] == len(block.nodes) + 1, inside  # + its input port
    assert inside["smallest_text_px"] >= READABLE_PX, inside
    shot(page, ARTIFACTS, "22-block-opened")

    # a bound parameter says so; an inner parameter is edited through the side form
    click_node(page, bound)
    wait_text(page, "bound to block param channels (int, default 64)", exact=False)
    click_node(page, norm)
    set_number(page, "momentum", 0.25)
    wait_node(page, norm, "momentum=0.25")
    shot(page, ARTIFACTS, "23-block-inner-node-edited")

    click_button(page, "← Back to pipeline")
    wait_node(page, uses[0], f"▣ {BLOCK}")
    wait_gone(page, re.compile(r"^Editing the block"))
    back = wait_canvas(page, f"v.nodes === {n}", "the pipeline back on the canvas")
    assert back["smallest_text_px"] >= READABLE_PX, back
    shot(page, ARTIFACTS, "24-back-to-the-pipeline")

    # the exported spec: the one definition changed, hence every use of it, and nothing else
    doc = _export(page)
    exported = next(b for b in doc["model"]["blocks"] if b["name"] == BLOCK)
    assert next(x for x in exported["nodes"] if x["id"] == norm)["params"] == {"momentum": 0.25}
    assert [x["id"] for x in doc["model"]["nodes"]] == [x.id for x in template.model.nodes]
    flat = {x.id: x.params for x in expand(spec_from_json(json.dumps(doc), source="export")).model.nodes}
    assert all(flat[f"{u}__{norm}"].get("momentum") == 0.25 for u in uses)
    assert all(flat[f"{u}__{norm}"].get("momentum", 0.1) == 0.1 for u in others)
    context.close()
