"""The canvas and the model never disagree: random edit sequences, made in the browser (connect, drag,
click, keyboard delete) and in Python (palette, side form, undo, redo, auto-layout), go through the
page's own canvas functions (portal/canvas.py: the state it sends, the event it reads back), and after
each one the canvas shows exactly the nodes and edges of the spec.

The browser side is a model of the component as docs/streamlit-flow.md records it: it takes Python's
state under a new key (remount) or when its own last update is not newer than Python's timestamp,
answers every state it takes, reports connections, drags and clicks, and deletes a selected node or
edge on Backspace *without* reporting it — when that node or edge is deletable. Its clock may be ahead
of the server's or behind it.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from portal import canvas
from portal.editor_state import Editor, edge_id


class FakeComponent:
    """What the browser holds and sends, per docs/streamlit-flow.md."""

    def __init__(self, clock_offset_ms: int) -> None:
        self.key: str | None = None
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.last_ts = 0
        self.offset = clock_offset_ms  # the browser's clock need not agree with the server's
        self.clock = 0
        self.value: dict[str, Any] | None = None  # what it sent last, under self.key
        self.args = ""  # the arguments of the last render: the same ones again do not reach the component

    def _now(self) -> int:
        self.clock += 1
        return canvas_now() + self.offset + self.clock

    def send(self, selected: str | None = None) -> None:
        self.last_ts = self._now()
        self.value = {"nodes": [dict(n) for n in self.nodes], "edges": [dict(e) for e in self.edges],
                      "selectedId": selected, "timestamp": self.last_ts}

    def render(self, ed: Editor) -> None:
        """The page drew the canvas: take Python's state when the component would."""
        nodes, edges = canvas.payload(ed)
        remount = ed.canvas_key != self.key
        args = json.dumps([ed.canvas_key, nodes, edges, ed.canvas_ts], sort_keys=True)
        if not remount and args == self.args:
            return  # Streamlit sends a component new arguments only when they changed
        self.args = args
        if remount or self.last_ts <= ed.canvas_ts:
            self.key = ed.canvas_key
            self.nodes = nodes
            self.edges = edges
            self.send()

    # the user's actions in the browser
    def connect(self, source: str, target: str) -> None:
        if not any(e["source"] == source and e["target"] == target for e in self.edges):
            self.edges.append({"id": edge_id(source, target), "source": source, "target": target})
        self.send(edge_id(source, target))

    def drag(self, node_id: str, x: float, y: float) -> None:
        for n in self.nodes:
            if n["id"] == node_id:
                n["position"] = {"x": x, "y": y}
        self.send()

    def click(self, node_id: str | None) -> None:
        self.send(node_id)

    def keyboard_delete(self, node_id: str | None, edge: tuple[str, str] | None) -> None:
        """Backspace on a selected element: gone in the browser, nothing sent (React Flow's own change)."""
        gone = {n["id"] for n in self.nodes if n["id"] == node_id and n.get("deletable", True)}
        self.nodes = [n for n in self.nodes if n["id"] not in gone]
        self.edges = [e for e in self.edges if not (e["source"] in gone or e["target"] in gone or (
            (e["source"], e["target"]) == edge and e.get("deletable", True)))]


def canvas_now() -> int:
    import time

    return int(time.time() * 1000)


def settle(ed: Editor, comp: FakeComponent) -> None:
    """Reruns until nothing new comes back: each reads the event (as the page does) and draws the canvas."""
    for _ in range(6):
        value = comp.value if comp.key == ed.canvas_key else None
        applied = ed.apply_canvas_value(value)
        before = comp.last_ts
        comp.render(ed)
        if not applied and comp.last_ts == before:
            return
    raise AssertionError("the canvas and Python kept answering each other")


def assert_agree(ed: Editor, comp: FakeComponent) -> None:
    spec_nodes = {n["id"] for n in ed.nodes}
    spec_edges = {(e["source"], e["target"]) for e in ed.edges}
    ext = ed.extraction()
    if ext.spec is not None:
        spec_nodes = {n.id for n in ext.spec.model.nodes}
        spec_edges = {(e.source, e.target) for e in ext.spec.model.edges}
    assert {n["id"] for n in comp.nodes} == spec_nodes == {n["id"] for n in ed.nodes}
    assert {(e["source"], e["target"]) for e in comp.edges} == spec_edges


OPS = ["ReLU", "Flatten", "Add", "Dropout"]
ACTIONS = st.lists(st.tuples(
    st.sampled_from(["connect", "drag", "click", "key_node", "key_edge", "add", "delete", "py_connect",
                     "disconnect", "undo", "redo", "layout"]),
    st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=25)


def _pick(items: list[Any], i: int) -> Any:
    return items[i % len(items)] if items else None


def step(ed: Editor, comp: FakeComponent, action: str, i: int, j: int) -> None:
    ids = [n["id"] for n in comp.nodes]
    pairs = [(e["source"], e["target"]) for e in comp.edges]
    if action == "connect" and ids:
        comp.connect(_pick(ids, i), _pick(ids, j))
    elif action == "drag" and ids:
        comp.drag(_pick(ids, i), float(i * 10), float(j * 10))
    elif action == "click":
        comp.click(_pick(ids, i) if i % 5 else None)
    elif action == "key_node":
        comp.keyboard_delete(_pick(ids, i), None)
    elif action == "key_edge":
        comp.keyboard_delete(None, _pick(pairs, i))
    elif action == "add":
        ed.add_node(OPS[i % len(OPS)])
    elif action == "delete" and ed.nodes:
        ed.delete_node(_pick([n["id"] for n in ed.nodes], i))
    elif action == "py_connect" and ed.nodes:
        ed.connect(_pick([n["id"] for n in ed.nodes], i), _pick([n["id"] for n in ed.nodes], j))
    elif action == "disconnect" and ed.edges:
        e = _pick(ed.edges, i)
        ed.disconnect(e["source"], e["target"])
    elif action == "undo":
        ed.undo()
    elif action == "redo":
        ed.redo()
    elif action == "layout":
        ed.layout()


@settings(max_examples=60, deadline=None)
@given(actions=ACTIONS, offset=st.integers(-60_000, 60_000))
def test_random_edits_keep_the_canvas_and_the_spec_in_agreement(actions, offset):
    ed = Editor()
    comp = FakeComponent(offset)
    settle(ed, comp)
    assert_agree(ed, comp)
    for action, i, j in actions:
        step(ed, comp, action, i, j)
        settle(ed, comp)
        assert_agree(ed, comp)


def test_keyboard_delete_is_off_for_every_node_and_edge():
    """The component deletes on Backspace only what is deletable: nothing the canvas is sent."""
    ed = Editor()
    relu = ed.add_node("ReLU")
    ed.connect("input", relu)
    nodes, edges = canvas.payload(ed)
    assert nodes and all(n["deletable"] is False for n in nodes)
    assert edges and all(e["deletable"] is False for e in edges)
