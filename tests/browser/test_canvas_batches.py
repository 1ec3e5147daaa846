"""What reaches Streamlit in one batch: a user's click must survive a canvas answer that lands beside it.

Streamlit's page gathers the widget values that reach it within one turn of its event loop into one message
(the last value of each widget, and the fragment of the *first* value that named one), and the component as
packaged answers every state Python sends, unasked, twice (the portal serves it patched not to since issue 21's
third pass, but a value of the canvas, a drag stop or a pane click, can still land beside a click). Both tests
put a user action and such a value into one batch on purpose: the canvas' messages are held back (a listener on the page's window that runs before Streamlit's), then
handed to Streamlit's own listener one after the other in one turn (``MessageEvent`` with the iframe as its
source, exactly as a message from it arrives). Without the fixes, CI saw both: a conv-net test whose click on a
node selected nothing, and a daily-use test whose "Load template" loaded a template the page never showed
(portal/flow_component.py, portal/canvas.py, docs/streamlit-flow.md).
"""

from __future__ import annotations

import re

from tests.browser.conftest import OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import (
    CANVAS,
    RUN_COUNTER,
    _wait,
    act,
    choose,
    click_button,
    wait_node,
    wait_text,
)

VIEWPORT = {"width": 1600, "height": 1300}

# Installed before the app's scripts: while window.__ftHold is true, the canvas' messages are kept in
# window.__ftHeld instead of reaching Streamlit; window.__ftLastCanvas is the last message the canvas sent.
HOLD = """(() => {
  window.__ftHeld = []; window.__ftHold = false; window.__ftLastCanvas = null;
  window.addEventListener('message', e => {
    const frame = document.querySelector('CANVAS');
    if (!frame || e.source !== frame.contentWindow || !e.data || e.data.type !== 'streamlit:setComponentValue') return;
    window.__ftLastCanvas = e.data;
    if (window.__ftHold) { e.stopImmediatePropagation(); window.__ftHeld.push(e.data); }
  }, true);
})();""".replace("CANVAS", CANVAS.replace("'", "\\'"))

# Hand messages to Streamlit's listener in one turn, as if the canvas had sent them.
DELIVER = """([sel, messages]) => {
  const source = document.querySelector(sel).contentWindow;
  for (const data of messages) window.dispatchEvent(new MessageEvent('message', {data, source}));
}"""

# An answer: the component's last value again, as it answers a state it takes (selectedId null, a new moment).
ANSWER = """(m) => ({...m, value: {...m.value, selectedId: null, timestamp: m.value.timestamp + 1}})"""


def _page(browser, user: str):
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers={USER_HEADER: user, SECRET_HEADER: PROXY_SECRET})
    context.add_init_script(RUN_COUNTER)
    context.add_init_script(HOLD)
    page = context.new_page()
    OPEN_PAGES.append(page)
    return context, page


def _selected(page, node_id: str) -> None:
    """Wait until the settled page's side form shows ``node_id`` as the selected node."""
    _wait(page, """(id) => {
      const app = document.querySelector('[data-testid="stApp"]');
      if (!app || app.getAttribute('data-test-script-state') !== 'notRunning' || document.querySelector('[data-stale="true"]')) return false;
      const box = [...document.querySelectorAll('[data-testid="stSelectbox"]')].find(b => b.innerText.includes('Selected node'));
      const input = box && box.querySelector('input');
      return !!input && input.value === id;
    }""", node_id, 60_000, f"the side form to show {node_id!r} selected")


def test_a_node_click_batched_with_a_canvas_answer_selects_the_node(portal, browser):
    context, page = _page(browser, "hana")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    click_button(page, "ReLU")  # from the palette: the new node is selected
    wait_node(page, "relu1")
    _selected(page, "relu1")

    page.evaluate("() => { window.__ftHeld = []; window.__ftHold = true; }")
    page.frame_locator(CANVAS).locator('.react-flow__node[data-id="input"]').click()
    page.wait_for_function("() => window.__ftHeld.some(m => m.value && m.value.selectedId === 'input')")
    # the component answers in the same turn: its message goes out the way every value of the component does
    page.frame_locator(CANVAS).locator("body").evaluate(
        f"(b, m) => window.parent.postMessage(({ANSWER})(m), '*')",
        page.evaluate("() => window.__ftHeld.find(m => m.value.selectedId === 'input')"))
    page.wait_for_function("() => window.__ftHeld.length >= 2 && window.__ftHeld.at(-1).value.selectedId === null")
    held = page.evaluate("() => { window.__ftHold = false; return window.__ftHeld; }")
    assert held[-1]["value"]["selectedId"] is None, "the answer must be the batch's last value"

    act(page, lambda: page.evaluate(DELIVER, [CANVAS, held]))
    _selected(page, "input")
    context.close()


def test_a_button_clicked_in_the_same_batch_as_a_canvas_answer_shows_its_result(portal, browser):
    context, page = _page(browser, "ivan")
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    choose(page, "Template from the model zoo", re.compile(r"^mnist_cnn — "))
    # a value of the canvas to put into the batch: the served component answers nothing unasked
    # (portal/flow_component.py), so the user clicks the empty pane (its corner: no node there)
    act(page, lambda: page.frame_locator(CANVAS).locator(".react-flow__pane").click(position={"x": 4, "y": 4}))
    page.wait_for_function("() => window.__ftLastCanvas !== null")

    # one turn: the click (Streamlit schedules its message), then the canvas' answer joins that message
    def click_and_answer() -> None:
        page.evaluate(f"""([sel, deliver]) => {{
          [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Load template').click();
          eval(deliver)([sel, [({ANSWER})(window.__ftLastCanvas)]]);
        }}""", [CANVAS, DELIVER])

    act(page, click_and_answer)
    wait_text(page, "Loaded the template mnist_cnn.")
    wait_text(page, re.compile(r"^Valid: 13 nodes"))
    wait_node(page, "conv2d1")
    context.close()
