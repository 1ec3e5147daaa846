"""Playwright helpers for the Streamlit portal and its streamlit-flow canvas (see
docs/streamlit-flow.md: the canvas remounts on every Python-side change, so for a moment
the page holds two canvas iframes — every helper waits until exactly one is left)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

CANVAS = 'iframe[title="streamlit_flow.streamlit_flow"]'
TIMEOUT_MS = 60_000

_NODE_READY = """([sel, node, text]) => {
  const frames = document.querySelectorAll(sel);
  if (frames.length !== 1 || !frames[0].contentDocument) return false;
  const n = frames[0].contentDocument.querySelector(`.react-flow__node[data-id="${node}"]`);
  return !!n && (text === null || n.innerText.includes(text));
}"""


def idle(page: Any, timeout: int = TIMEOUT_MS) -> None:
    """Wait until Streamlit is not running the script (its status widget is gone)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def wait_node(page: Any, node_id: str, text: str | None = None, timeout: int = TIMEOUT_MS) -> None:
    """Wait for one canvas iframe holding node ``node_id`` (whose text contains ``text``)."""
    page.wait_for_function(_NODE_READY, arg=[CANVAS, node_id, text], timeout=timeout)
    idle(page)
    page.wait_for_function(_NODE_READY, arg=[CANVAS, node_id, text], timeout=timeout)


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
    page.mouse.move(*_centre(src))
    page.mouse.down()
    page.mouse.move(*_centre(tgt), steps=12)
    page.mouse.up()


def click_node(page: Any, node_id: str) -> None:
    wait_node(page, node_id)
    page.frame_locator(CANVAS).locator(f'.react-flow__node[data-id="{node_id}"]').click()


def choose(page: Any, label: str, option: str | re.Pattern[str]) -> None:
    """Pick an option of the selectbox labelled ``label``."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True))
    box.click()
    page.get_by_role("option", name=option).first.click()
    idle(page)


def set_number(page: Any, label: str, value: float) -> None:
    field = page.get_by_label(label, exact=True)
    field.fill(str(value))
    field.press("Enter")
    idle(page)


def shot(page: Any, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    return path
