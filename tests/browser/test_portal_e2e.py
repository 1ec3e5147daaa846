"""The acceptance test of the portal, in headless Debian chromium: draw a conv net from the palette by
dragging connections, point the data layer at sklearn:digits, run it with the local executor, watch
it complete with its accuracy curve and download the model; a cycle drawn in the browser is
refused with a visible message; another user does not see the run."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import (
    RUN_COUNTER,
    act,
    choose,
    click_button,
    click_node,
    drag_connect,
    node_text,
    set_number,
    shot,
    wait_node,
    wait_text,
)

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}
LAYERS = ["Conv2d", "ReLU", "MaxPool2d", "Flatten", "Linear"]
IDS = ["input", "conv2d1", "relu1", "maxpool2d1", "flatten1", "linear1", "output"]
# digits are 1×8×8: conv 3×3 (32 channels) → 32×6×6 → pool 2 → 32×3×3 → flatten 288 → linear 10
SHAPES = {"conv2d1": "→ 32×6×6", "relu1": "→ 32×6×6", "maxpool2d1": "→ 32×3×3", "flatten1": "→ 288",
          "linear1": "→ 64", "output": "→ 64"}
RUN_TIMEOUT_MS = 420_000


def _page(browser, user: str | None, *, via_proxy: bool = True):
    """A browser context whose requests carry what the sign-in proxy adds (``via_proxy``) and the user."""
    headers = {SECRET_HEADER: PROXY_SECRET} if via_proxy else {}
    if user:
        headers[USER_HEADER] = user
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers=headers, accept_downloads=True)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    return context, page


def test_draw_run_and_watch_a_conv_net_in_the_browser(portal, browser, tmp_path):
    out = ARTIFACTS
    context, page = _page(browser, "alice")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    wait_text(page, "Signed in as alice", exact=False)

    # --- data layer: the built-in digits
    choose(page, "Built-in dataset", re.compile(r"^sklearn:digits"))
    wait_text(page, re.compile(r"Detected: format builtin \(image\), 1,797 samples"))
    shot(page, out, "01-data-layer")

    # --- graph layer: layers from the palette, connected by dragging
    for op in LAYERS:
        click_button(page, op)
        wait_node(page, f"{op.lower()}1")
    for source, target in zip(IDS, IDS[1:]):
        drag_connect(page, source, target)
        wait_node(page, target, SHAPES[target])
    assert "classes" in node_text(page, "output"), "64 outputs for 10 classes must be flagged on the Output node"
    shot(page, out, "02-graph-drawn")

    # the side form: click the Linear node, set out_features to the 10 classes
    click_node(page, "linear1")
    wait_text(page, "out_features")
    set_number(page, "out_features", 10)
    wait_node(page, "output", "→ 10")
    wait_text(page, re.compile(r"^Valid: 7 nodes"))

    # a cycle drawn in the browser is refused, visibly, and the graph stays valid
    drag_connect(page, "linear1", "conv2d1")
    wait_text(page, re.compile(r"would close the cycle linear1 → conv2d1 → .* → linear1"))
    wait_node(page, "linear1", "→ 10")
    shot(page, out, "03-cycle-refused")
    wait_text(page, re.compile(r"^Valid: 7 nodes"))

    # --- training layer
    set_number(page, "Epochs", 4)
    set_number(page, "Log every N steps", 10)
    shot(page, out, "04-training-layer")

    # --- run it with the local executor and watch it
    act(page, page.get_by_role("link", name="Runs").click)
    act(page, page.get_by_role("button", name="Submit run").click, timeout=300_000)
    label = wait_text(page, re.compile(r"^Submitted run \S+: \w+ on local")).inner_text()
    run_id = re.search(r"Submitted run (\S+):", label).group(1)
    # the message stays while the run goes on and after it ends (the page reruns when it does)
    wait_text(page, re.compile(rf"Run {re.escape(run_id)} — COMPLETED"), timeout=RUN_TIMEOUT_MS)
    accuracy = wait_text(page, "Accuracy")
    wait_text(page, "Loss")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    assert charts.count() >= 2, "loss and accuracy charts"
    wait_text(page, re.compile(rf"^Submitted run {re.escape(run_id)}: \w+ on local"))
    accuracy.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, out, "05-run-curves")
    download = page.get_by_role("button", name=re.compile(r"^Download model model\/model\.pt"))
    download.scroll_into_view_if_needed()
    shot(page, out, "06-run-artifacts")
    with page.expect_download() as info:
        download.click()
    model = tmp_path / "model.pt"
    info.value.save_as(model)
    assert model.stat().st_size > 10_000
    context.close()

    # --- another user sees none of it
    context, page = _page(browser, "bob")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    wait_text(page, "Signed in as bob", exact=False)
    act(page, page.get_by_role("link", name="Runs").click)
    wait_text(page, "Your runs (0)")
    assert run_id not in page.content()
    shot(page, out, "07-second-user")
    context.close()


def test_a_request_without_the_trusted_header_is_refused(portal, browser):
    context, page = _page(browser, None)
    page.goto(portal.url)
    wait_text(page, re.compile(r"this request has no X-Remote-User header"))
    assert page.locator('iframe[title="portal.flow_component.streamlit_flow"]').count() == 0
    shot(page, ARTIFACTS, "08-no-user-header")
    context.close()


def test_a_forged_user_header_without_the_proxy_is_refused(portal, browser):
    context, page = _page(browser, "alice", via_proxy=False)
    page.goto(portal.url)
    wait_text(page, re.compile(r"did not come through the portal's sign-in proxy"))
    assert page.locator('iframe[title="portal.flow_component.streamlit_flow"]').count() == 0
    context.close()
