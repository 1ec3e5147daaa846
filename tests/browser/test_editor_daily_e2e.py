"""An editor a researcher works in every day, in headless Debian chromium: keyboard delete on the
canvas never leaves the canvas and the spec disagreeing, a reload shows the work as it was (saved on
the server after every change, undo history included), and a training layer asking for more than the
local scheduler's machine has is said so beside "Valid", fitted in one click, and runs."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import (
    CANVAS,
    RUN_COUNTER,
    act,
    choose,
    click_button,
    click_node,
    set_number,
    shot,
    wait_node,
    wait_text,
)

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}
RUN_TIMEOUT_MS = 420_000


def _page(browser, user: str):
    headers = {USER_HEADER: user, SECRET_HEADER: PROXY_SECRET}
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers=headers)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    return context, page


def test_keyboard_delete_changes_nothing_and_a_reload_keeps_the_work(portal, browser):
    context, page = _page(browser, "dana")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    click_button(page, "ReLU")  # from the palette
    wait_node(page, "relu1")
    wait_text(page, "3 nodes · 0 edges")

    # Backspace on a selected node: the component would hide it in the browser only; it is switched off
    click_node(page, "relu1")
    node = page.frame_locator(CANVAS).locator('.react-flow__node[data-id="relu1"]')
    node.press("Backspace")
    page.frame_locator(CANVAS).locator(".react-flow__pane").press("Delete")
    # a rerun made elsewhere (the batch size's + button) sends Python's state to the canvas again
    batch = page.locator('[data-testid="stNumberInput"]').filter(has=page.get_by_text("Batch size", exact=True))
    act(page, batch.get_by_test_id("stNumberInputStepUp").click)
    wait_node(page, "relu1")
    wait_text(page, "3 nodes · 0 edges")
    assert page.frame_locator(CANVAS).locator(".react-flow__node").count() == 3
    # the help says how deleting works, and no longer offers a right-click that does nothing; relu1 is still
    # the selected node (the click above): clicking it again changes nothing and need not run the script
    wait_text(page, "max(x, 0).")  # the side form shows relu1, the only ReLU
    act(page, page.get_by_role("button", name="Delete node").click)
    wait_text(page, "2 nodes · 0 edges")
    page.wait_for_function("sel => document.querySelector(sel).contentDocument"
                           ".querySelectorAll('.react-flow__node').length === 2", arg=CANVAS, polling=100,
                           timeout=60_000)
    assert "right-click" not in page.locator("body").inner_text()

    # undo brings relu1 back; a reload shows the pipeline as it was, with undo and redo as they were
    click_button(page, "↶ Undo")
    wait_node(page, "relu1")
    page.reload()
    wait_node(page, "relu1", timeout=90_000)
    wait_text(page, re.compile(r"^Opened your draft .* as you left it"))
    assert page.get_by_role("button", name="↶ Undo").is_enabled()
    assert page.get_by_role("button", name="↷ Redo").is_enabled()
    click_button(page, "↷ Redo")
    wait_text(page, "2 nodes · 0 edges")
    shot(page, ARTIFACTS, "20-reload-kept-the-draft")
    context.close()


def test_more_than_this_machine_has_is_fitted_in_one_click_and_runs(portal, browser):
    context, page = _page(browser, "erin")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    choose(page, "Template from the model zoo", re.compile(r"^mnist_cnn — "))
    click_button(page, "Load template")
    wait_text(page, "Loaded the template mnist_cnn.")
    set_number(page, "Epochs", 1)
    set_number(page, "GPUs per node", 64)  # more than any machine here has
    warning = wait_text(page, re.compile(r"^Valid, but local has \d+ CPUs?, .* and (no GPU|\d+ GPUs?): .*resource "
                                         r"problem"))
    warning.scroll_into_view_if_needed()
    shot(page, ARTIFACTS, "21-more-than-this-machine")
    click_button(page, "Fit to this machine")
    wait_text(page, re.compile(r"^Valid: .* Fits local"))
    act(page, page.get_by_role("link", name="Runs").click)
    act(page, page.get_by_role("button", name="Submit run").click, timeout=300_000)
    label = wait_text(page, re.compile(r"^Submitted run \S+: \w+ on local")).inner_text()
    run_id = re.search(r"Submitted run (\S+):", label).group(1)
    wait_text(page, re.compile(rf"Run {re.escape(run_id)} — COMPLETED"), timeout=RUN_TIMEOUT_MS)
    shot(page, ARTIFACTS, "22-fitted-run-completed")
    context.close()
