"""An edit in the graph layer reruns the graph layer alone, and the page still shows it everywhere it must
(portal/graph_fragment.py): the toolbar's export is the document with the edit, the drafts bar says the new
revision was saved, a reload shows it; an edit that changes the page outside the graph layer (the first one:
Undo becomes possible) runs the whole page."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.conftest import OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import RUN_COUNTER, click_button, settled, wait_node, wait_text

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}

# How each script run ended, as the server said (ForwardMsg field 6, script_finished: 0 the whole page,
# 3 a fragment alone), in window.__ftFinished.
FINISHED = """(() => {
  window.__ftFinished = [];
  const Native = window.WebSocket;
  const Logged = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener('message', e => {
      if (!(e.data instanceof ArrayBuffer)) return;
      const buf = new Uint8Array(e.data); let i = 0;
      const varint = () => { let x = 0, s = 0, b; do { b = buf[i++]; x += (b & 0x7f) * 2 ** s; s += 7; } while (b & 0x80 && i < buf.length); return x; };
      while (i < buf.length) {
        const key = varint(), wire = key & 7, field = Math.floor(key / 8);
        if (wire === 0) { const v = varint(); if (field === 6) window.__ftFinished.push(v); }
        else if (wire === 1) i += 8; else if (wire === 2) { const n = varint(); i += n; } else if (wire === 5) i += 4; else break;
      }
    });
    return ws;
  };
  Logged.prototype = Native.prototype;
  for (const k of ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']) Logged[k] = Native[k];
  window.WebSocket = Logged;
})();"""

WHOLE_PAGE, FRAGMENT = 0, 3


def _finished_since(page, start: int) -> list[int]:
    return page.evaluate("n => window.__ftFinished.slice(n)", start)


def _revision(page) -> int:
    text = wait_text(page, re.compile(r"^Saved on the server · revision \d+$")).inner_text()
    return int(text.rsplit(" ", 1)[1])


def _exported(page) -> dict:
    with page.expect_download() as download:
        page.get_by_role("button", name="Export spec (JSON)").click()
    return json.loads(open(download.value.path(), encoding="utf-8").read())


def test_a_palette_add_reruns_the_graph_layer_alone_and_the_page_still_shows_it(portal, browser):
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True,
                                  extra_http_headers={USER_HEADER: "fran", SECRET_HEADER: PROXY_SECRET})
    context.add_init_script(FINISHED)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    page.goto(portal.url)
    wait_node(page, "input", timeout=90_000)
    assert not page.get_by_role("button", name="↶ Undo").is_enabled()

    # the first edit makes Undo possible: the whole page runs
    start = page.evaluate("() => window.__ftFinished.length")
    click_button(page, "ReLU")
    wait_node(page, "relu1")
    wait_text(page, "3 nodes · 0 edges")
    assert WHOLE_PAGE in _finished_since(page, start)
    assert page.get_by_role("button", name="↶ Undo").is_enabled()
    revision = _revision(page)

    # the next one changes nothing outside the graph layer: it runs alone, and what the page shows of it is new
    start = page.evaluate("() => window.__ftFinished.length")
    click_button(page, "Linear")
    wait_node(page, "linear1")
    wait_text(page, "4 nodes · 0 edges")
    settled(page)
    assert _finished_since(page, start) == [FRAGMENT]
    assert _revision(page) == revision + 1  # saved, and said so in the drafts bar
    assert {n["id"] for n in _exported(page)["model"]["nodes"]} == {"input", "output", "relu1", "linear1"}

    # a reload opens the draft with the edit
    page.reload()
    wait_node(page, "linear1", timeout=90_000)
    wait_text(page, "4 nodes · 0 edges")
    context.close()
