"""Playwright helpers for the Streamlit portal and its streamlit-flow canvas.

Why the waits look the way they do (docs/streamlit-flow.md has the component's facts):

- A Streamlit rerun does not replace the page at once. While the script runs, the previous
  elements stay on the page marked ``data-stale="true"``, and new ones are added as the script
  reaches them; for a moment the page can hold the old and the new copy of the same text. The
  canvas remounts on every Python-side change, so it too exists twice for a moment.
- The app publishes its own state on its root element
  (``[data-testid="stApp"][data-test-script-state]``: ``running`` → ``notRunning``).

So every check here is one atomic look at the DOM, polled by Playwright until it holds: the script
is not running, nothing is stale, and *exactly one* live element matches. A check never passes on
a transient copy and never fails on one: it waits for the page's settled state. Actions that make
the script rerun go through :func:`act`, which also waits for that rerun to *end*, so a check made
after it cannot be satisfied by the page as it was before the action. No fixed sleeps anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

CANVAS = 'iframe[title="portal.flow_component.streamlit_flow"]'
TIMEOUT_SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
TIMEOUT_MS = 60_000

# Counts the script runs that ended since the page loaded: the server's "script finished" messages (ForwardMsg
# field 6, ``script_finished``, whatever the run: the whole page, a fragment, one ended early for a rerun) as
# they arrive on the websocket. Installed on every page of a browser context before the app's own scripts run.
# The root's state changing from `running` missed runs: a short run (the canvas' fragment, an upload on the
# Runs page) can start and end within one render of the page, and its `running` never reaches the DOM (measured:
# 4 runs finished, 2 seen in the DOM, for a page load and a palette add; CI: "waited 60 s for a script run to
# end after the action" after a run that had happened).
RUN_COUNTER = """(() => {
  window.__ftRunsEnded = 0;
  // the numbers of a protobuf message's top-level fields
  const fields = (buf) => {
    const out = []; let i = 0;
    const varint = () => { let x = 0, s = 0, b; do { b = buf[i++]; x += (b & 0x7f) * 2 ** s; s += 7; } while (b & 0x80 && i < buf.length); return x; };
    while (i < buf.length) {
      const key = varint(), wire = key & 7; out.push(Math.floor(key / 8));
      if (wire === 0) varint(); else if (wire === 1) i += 8; else if (wire === 2) { const n = varint(); i += n; } else if (wire === 5) i += 4; else break;
    }
    return out;
  };
  const Native = window.WebSocket;
  const Counted = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener('message', e => {
      if (e.data instanceof ArrayBuffer && fields(new Uint8Array(e.data)).includes(6)) window.__ftRunsEnded += 1;
    });
    return ws;
  };
  Counted.prototype = Native.prototype;
  for (const k of ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']) Counted[k] = Native[k];
  window.WebSocket = Counted;
})();"""

# The page is settled: connected, the script not running, no stale element left from a rerun.
_SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
    && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]');
}"""

# Live elements whose text matches (whitespace collapsed), innermost only — as Playwright's own
# get_by_text picks them: visible, and neither stale nor inside a stale element.
_MATCHES = """(pattern, flags) => {
  const re = new RegExp(pattern, flags);
  const hits = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (!(el instanceof HTMLElement) || ['SCRIPT', 'STYLE', 'IFRAME'].includes(el.tagName)
        || !el.getClientRects().length) continue;
    if (el.closest('[data-stale="true"]')) continue;
    if (re.test(el.innerText.replace(/\\s+/g, ' ').trim())) hits.push(el);
  }
  return hits.filter(el => !hits.some(other => other !== el && el.contains(other)));
}"""

_ONE_TEXT = f"""([pattern, flags]) => ({_SETTLED})() && ({_MATCHES})(pattern, flags).length === 1"""

_NODE_READY = f"""([sel, node, text]) => {{
  if (!({_SETTLED})()) return false;
  const frames = document.querySelectorAll(sel);
  if (frames.length !== 1 || !frames[0].contentDocument) return false;
  const n = frames[0].contentDocument.querySelector(`.react-flow__node[data-id="${{node}}"]`);
  return !!n && (text === null || n.innerText.includes(text));
}}"""


def _regex(text: str | re.Pattern[str], exact: bool) -> tuple[str, str]:
    if isinstance(text, re.Pattern):
        return text.pattern, "i" if text.flags & re.IGNORECASE else ""
    return ("^" + re.escape(text) + "$", "") if exact else (re.escape(text), "i")


_STATE = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return {runs_ended: window.__ftRunsEnded, connection: app && app.getAttribute('data-test-connection-state'),
          script: app && app.getAttribute('data-test-script-state'),
          stale: [...document.querySelectorAll('[data-stale="true"]')].map(e => e.innerText.slice(0, 80)),
          messages: [...document.querySelectorAll('[data-testid="stAlert"], [data-testid="stFileUploader"]')]
            .map(e => e.innerText.replace(/\\s+/g, ' ').slice(0, 160))};
}"""


def _wait(page: Any, condition: str, arg: Any, timeout: int, what: str) -> None:
    """``page.wait_for_function``, whose time-out says what was awaited and how the page stood."""
    try:
        page.wait_for_function(condition, arg=arg, timeout=timeout, polling=100)
    except PlaywrightTimeoutError:
        picture = _timeout_shot(page)
        raise AssertionError(f"waited {timeout / 1000:g} s for {what}; the page: {page.evaluate(_STATE)}; "
                             f"screenshot: {picture}") from None


def _timeout_shot(page: Any) -> Path:
    """A screenshot of the page as a wait gave up on it, for the CI artifacts (``timeout-N.png``)."""
    TIMEOUT_SHOTS.mkdir(parents=True, exist_ok=True)
    path = TIMEOUT_SHOTS / f"timeout-{len(list(TIMEOUT_SHOTS.glob('timeout-*.png'))) + 1}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def settled(page: Any, timeout: int = TIMEOUT_MS) -> None:
    """Wait until the app is connected, its script not running and no stale element is left."""
    _wait(page, _SETTLED, None, timeout, "a settled page")


def act(page: Any, action: Callable[[], Any], timeout: int = TIMEOUT_MS) -> None:
    """Do ``action`` (a click, a key press…) that makes the script rerun; return once a run that
    ended after the action has left the page settled. The page is settled first: an action taken
    while a run is under way can be lost with that run."""
    settled(page, timeout)
    before = page.evaluate("() => window.__ftRunsEnded")
    action()
    _wait(page, f"n => window.__ftRunsEnded > n && ({_SETTLED})()", before, timeout,
          f"a script run to end after the action (runs ended before it: {before})")


def wait_text(page: Any, text: str | re.Pattern[str], exact: bool = True, timeout: int = TIMEOUT_MS) -> Any:
    """Wait until the settled page shows exactly one live element with this text; return a locator
    of it (``.first``: a later rerun may add a transient copy while the caller uses it)."""
    pattern, flags = _regex(text, exact)
    _wait(page, _ONE_TEXT, [pattern, flags], timeout, f"exactly one element with the text /{pattern}/")
    return page.get_by_text(re.compile(pattern, re.IGNORECASE if flags else 0)).first


def wait_gone(page: Any, text: str | re.Pattern[str], exact: bool = True, timeout: int = TIMEOUT_MS) -> None:
    """Wait until the settled page shows no live element with this text."""
    pattern, flags = _regex(text, exact)
    _wait(page, f"([pattern, flags]) => ({_SETTLED})() && ({_MATCHES})(pattern, flags).length === 0",
          [pattern, flags], timeout, f"no element with the text /{pattern}/")


# The canvas' view and the size its node text has on screen: the font size of every element of a node
# that holds text, times the zoom of the viewport (its CSS transform).
_CANVAS_VIEW = r"""(sel) => {
  const frames = document.querySelectorAll(sel);
  if (frames.length !== 1 || !frames[0].contentDocument) return null;
  const doc = frames[0].contentDocument;
  const viewport = doc.querySelector('.react-flow__viewport');
  if (!viewport) return null;
  const m = /scale\(([\d.e-]+)\)/.exec(viewport.style.transform);
  const zoom = m ? parseFloat(m[1]) : 1;
  let smallest = Infinity, nodes = 0;
  for (const node of doc.querySelectorAll('.react-flow__node')) {
    nodes += 1;
    for (const el of node.querySelectorAll('*')) {
      if ([...el.childNodes].some(c => c.nodeType === 3 && c.textContent.trim()))
        smallest = Math.min(smallest, parseFloat(doc.defaultView.getComputedStyle(el).fontSize) * zoom);
    }
  }
  return {transform: viewport.style.transform, zoom, smallest_text_px: smallest, nodes,
          minimap: !!doc.querySelector('.react-flow__minimap'), mark: frames[0].contentWindow.__ftMark || null};
}"""


def canvas_view(page: Any) -> dict[str, Any]:
    """The one canvas' viewport transform, zoom, smallest node text on screen (px), node count,
    whether it shows a minimap, and the mark :func:`mark_canvas` left (None after a remount)."""
    view = page.evaluate(_CANVAS_VIEW, CANVAS)
    assert view is not None, "no single canvas on the page"
    return view


def wait_canvas(page: Any, condition: str, what: str, timeout: int = TIMEOUT_MS) -> dict[str, Any]:
    """Wait for a settled page whose canvas view ``v`` (see :func:`canvas_view`) makes the JavaScript
    expression ``condition`` true; returns that view."""
    _wait(page, f"(sel) => {{ if (!({_SETTLED})()) return false; const v = ({_CANVAS_VIEW})(sel); "
                f"return !!v && !!({condition}); }}", CANVAS, timeout, what)
    return canvas_view(page)


def mark_canvas(page: Any, value: str) -> None:
    """Leave a mark in the canvas iframe's window: it survives an update, not a remount."""
    page.evaluate("([sel, v]) => { document.querySelector(sel).contentWindow.__ftMark = v; }", [CANVAS, value])


def wait_node(page: Any, node_id: str, text: str | None = None, timeout: int = TIMEOUT_MS) -> None:
    """Wait for a settled page with one canvas iframe holding node ``node_id`` (text containing ``text``)."""
    _wait(page, _NODE_READY, [CANVAS, node_id, text], timeout,
          f"one canvas holding node {node_id!r}" + (f" with {text!r}" if text else ""))


def node_text(page: Any, node_id: str) -> str:
    return page.frame_locator(CANVAS).locator(f'.react-flow__node[data-id="{node_id}"]').inner_text()


def _centre(box: dict[str, float]) -> tuple[float, float]:
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def drag_connect(page: Any, source: str, target: str) -> None:
    """Draw an edge with the mouse: source node's bottom handle → target node's top handle."""
    wait_node(page, source)
    wait_node(page, target)
    page.locator(CANVAS).evaluate("e => e.scrollIntoView({block: 'center'})")
    frame = page.frame_locator(CANVAS)
    src = frame.locator(f'.react-flow__node[data-id="{source}"] .react-flow__handle.source').bounding_box()
    tgt = frame.locator(f'.react-flow__node[data-id="{target}"] .react-flow__handle.target').bounding_box()
    assert src and tgt, f"handles of {source} / {target} not found"

    def drag() -> None:
        page.mouse.move(*_centre(src))
        page.mouse.down()
        page.mouse.move(*_centre(tgt), steps=12)
        page.mouse.up()

    act(page, drag)


def click_node(page: Any, node_id: str) -> None:
    wait_node(page, node_id)
    act(page, page.frame_locator(CANVAS).locator(f'.react-flow__node[data-id="{node_id}"]').click)


def click_button(page: Any, name: str | re.Pattern[str]) -> None:
    act(page, page.get_by_role("button", name=name, exact=isinstance(name, str)).click)


def choose(page: Any, label: str, option: str | re.Pattern[str]) -> None:
    """Pick an option of the selectbox labelled ``label`` (nothing happens when it is chosen already:
    Streamlit does not rerun for an unchanged value)."""
    settled(page)
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True))
    shown = box.get_by_role("combobox").input_value()  # the chosen option's text
    if option.search(shown) if isinstance(option, re.Pattern) else shown == option:
        return
    box.click()
    act(page, page.get_by_role("option", name=option).first.click)


def set_number(page: Any, label: str, value: float) -> None:
    """Type ``value`` into the number field labelled ``label`` (nothing happens when it holds it already)."""
    settled(page)
    field = page.get_by_label(label, exact=True)
    if field.input_value() and float(field.input_value()) == value:
        return
    field.fill(str(value))
    act(page, lambda: field.press("Enter"))


def shot(page: Any, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    return path
