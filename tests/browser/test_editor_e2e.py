"""The editor a researcher works in, in headless Debian chromium: a real network (resnet18_cifar)
loads with the forms showing it, marked as needing its data, drawn readably at the fitted zoom and
keeping the user's zoom across an edit; an ImageNet-shaped one becomes valid once its example data is
generated; an import error stays until dismissed; a label is text;
the cluster page's bars are readable. Every wait is a condition (tests/browser/ui.py)."""

from __future__ import annotations

import re
import time

import pytest

from core import zoo
from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import (
    CANVAS,
    RUN_COUNTER,
    act,
    canvas_view,
    choose,
    click_button,
    click_node,
    mark_canvas,
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
STAYS_S = 5.0


def _page(browser, user: str = "carol"):
    # each test signs in as a user of its own: a new tab opens that user's last draft (portal/drafts_view.py),
    # so a test that starts from a fresh editor must not share its user with an earlier test
    # as the sign-in proxy sends it: the user and the proxy's secret (tests/browser/conftest.py)
    headers = {USER_HEADER: user, SECRET_HEADER: PROXY_SECRET}
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers=headers)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    return context, page


def _field(page, label: str):
    settled(page)
    return page.get_by_label(label, exact=True)


def test_resnet18_cifar_loads_marked_and_readable_and_keeps_the_view(portal, browser):
    context, page = _page(browser)
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    choose(page, "Template from the model zoo", re.compile(r"^resnet18_cifar — "))
    click_button(page, "Load template")
    wait_node(page, "globalavgpool1")
    wait_text(page, "Loaded the template resnet18_cifar.")
    # the forms show the template (not the values the browser held before), also after another rerun
    want = zoo.template("resnet18_cifar").data
    choose(page, "Template from the model zoo", re.compile(r"^mlp — "))  # a rerun that changes nothing else
    assert _field(page, "Batch size").input_value() == str(want.batch_size)
    assert _field(page, "Model input shape (empty = from data)").input_value() == "3, 32, 32"
    # valid as a graph, but its CIFAR folder is not under this portal's data root: marked, not "Valid"
    wait_text(page, re.compile(r"^Needs your data\."))
    wait_text(page, re.compile(r"^Not runnable yet: the data layer needs your data"))
    # readable at the fitted zoom: fitting its nodes (blocks drawn as one node each: 15, not 69 layers)
    # stops where the node text is still ≥ 10 px
    n = len(zoo.template("resnet18_cifar").model.nodes)
    view = wait_canvas(page, f"v.nodes === {n} && v.zoom < 1 && v.smallest_text_px < Infinity",
                       "the canvas fitted to resnet18_cifar")
    assert view["smallest_text_px"] >= READABLE_PX, view
    assert view["minimap"], "a graph this big has a minimap"
    shot(page, ARTIFACTS, "10-resnet18-cifar-fitted")

    # zoom in, then edit a node: the same canvas takes the new text and keeps the zoom and pan. On a
    # flat network of many Conv2d (resnet18_cifar has one outside its blocks, the stem, out of view)
    choose(page, "Template from the model zoo", re.compile(r"^vgg16 — "))
    click_button(page, "Load template")
    wait_text(page, "Loaded the template vgg16.")
    count = len(zoo.template("vgg16").model.nodes)
    view = wait_canvas(page, f"v.nodes === {count} && v.smallest_text_px < Infinity", "the canvas of vgg16")
    mark_canvas(page, "before-the-edit")
    page.frame_locator(CANVAS).locator(".react-flow__controls-zoomin").click()
    zoomed = wait_canvas(page, f"Math.abs(v.zoom - {view['zoom']} * 1.2) < 1e-3", "the zoom-in (×1.2) to end")
    conv = page.evaluate("""(sel) => {
      const doc = document.querySelector(sel).contentDocument;
      const pane = doc.querySelector('.react-flow').getBoundingClientRect();
      for (const n of doc.querySelectorAll('.react-flow__node')) {
        const r = n.getBoundingClientRect();
        if (n.innerText.startsWith('Conv2d') && r.top > pane.top && r.bottom < pane.bottom
            && r.left > pane.left && r.right < pane.right) return n.getAttribute('data-id');
      }
      return null;
    }""", CANVAS)
    assert conv, "a Conv2d node in view"
    click_node(page, conv)
    set_number(page, "out_channels", 48)
    wait_node(page, conv, "out_channels=48")
    after = canvas_view(page)
    assert after["mark"] == "before-the-edit", "the canvas was remounted by an edit"
    assert after["transform"] == zoomed["transform"], (zoomed, after)
    shot(page, ARTIFACTS, "11-vgg16-edited-view-kept")

    # the ImageNet-shaped vgg16 made runnable here: its example data written under the data root
    wait_text(page, re.compile(r"^Needs your data\."))
    # 1,000 JPEGs of 224×224 take seconds, more on a busy machine: the click's run may take longer
    act(page, page.get_by_role("button", name=re.compile(r"Generate example data$")).click, timeout=180_000)
    wait_text(page, re.compile(r"^Generated example data: 1,000 JPEG images in 1000 class folders"))
    wait_gone(page, re.compile(r"^Needs your data\."))
    assert len(list((portal.data / "imagenet" / "train").glob("class*/*.jpg"))) == 1000
    # valid, but vgg16 asks for 2 nodes × 4 GPUs × 8 CPUs: the local scheduler cannot run that, and says so
    # in the open, every resource at once, with one click to fit the training layer to this machine
    wait_text(page, re.compile(r"^Valid, but local has \d+ CPUs?, .*resource problem"))
    shot(page, ARTIFACTS, "11b-vgg16-example-data")
    click_button(page, "Fit to this machine")
    wait_text(page, re.compile(r"^Valid: .* Fits local"))
    assert page.get_by_role("spinbutton", name="Nodes", exact=True).input_value() == "1"
    shot(page, ARTIFACTS, "11c-vgg16-fitted")
    context.close()


def test_an_import_error_stays_until_dismissed_and_a_label_is_text(portal, browser):
    context, page = _page(browser, "dora")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    uploader = (page.locator('[data-testid="stFileUploader"]').filter(has_text="Import a spec (JSON)")
                .locator('input[type="file"]'))
    act(page, lambda: uploader.set_input_files(files=[{"name": "broken.json", "mimeType": "application/json",
                                                        "buffer": b'{"model": '}]))
    message = re.compile(r"^Could not import broken\.json")
    wait_text(page, message)
    shown_at = time.monotonic()
    # reruns the user causes elsewhere (and the canvas' own) leave it there, for more than 5 s: the
    # batch size's + and - buttons, each click a real change and a rerun that ends settled
    batch = page.locator('[data-testid="stNumberInput"]').filter(has=page.get_by_text("Batch size", exact=True))
    step = ("stNumberInputStepUp", "stNumberInputStepDown")
    clicks = 0
    while time.monotonic() - shown_at < STAYS_S:
        act(page, batch.get_by_test_id(step[clicks % 2]).click)
        clicks += 1
    wait_text(page, message)
    assert time.monotonic() - shown_at >= STAYS_S
    shot(page, ARTIFACTS, "12-import-error-after-5s")
    block = page.locator('[data-testid="stHorizontalBlock"]').filter(has_text="Could not import broken.json")
    act(page, block.get_by_role("button", name="✕").click)
    wait_gone(page, message)

    # a label with HTML, an image, a link and math is shown as the text it is
    click_node(page, "input")
    label = '<img src=x onerror="window.__ftPwned=1"> ![p](http://127.0.0.1:9/p.png) $x^2$ [a](b)'
    field = _field(page, "Label")
    field.fill(label)
    act(page, lambda: field.press("Enter"))
    wait_node(page, "input", "<img src=x")
    node = page.frame_locator(CANVAS).locator('.react-flow__node[data-id="input"]')
    assert label in node.inner_text().replace("\n", " ").replace("\u2060", "")  # word joiners: see md_text
    assert node.locator("img, a, .katex").count() == 0
    shot(page, ARTIFACTS, "13-label-as-text")
    context.close()


def test_the_cluster_bars_are_readable(portal, browser):
    context, page = _page(browser, "frank")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    act(page, page.get_by_role("link", name="Cluster").click)
    wait_text(page, "Partitions and nodes (local)")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] canvas, "
                           "[data-testid=\"stVegaLiteChart\"] svg').length >= 2", polling=100, timeout=60_000)
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box and box["height"] >= 120 and box["width"] >= 300, box
    charts.first.scroll_into_view_if_needed()
    shot(page, ARTIFACTS, "14-cluster-bars")
    context.close()
