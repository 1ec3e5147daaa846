"""The canvas and the model never disagree: random edit sequences, made in the browser (connect, drag,
click, keyboard delete) and in Python (palette, side form, undo, redo, auto-layout), go through the
page's own canvas functions (portal/canvas.py: the state it sends, the event it reads back), and after
each one the canvas shows exactly the nodes and edges of the spec.

The browser side is a model of the component as docs/streamlit-flow.md records it: it takes Python's
state under a new key (remount) or when its own last update is not newer than Python's timestamp,
answers every state it takes (the package's build) or not (a build patched not to answer),
reports connections, drags and clicks, and deletes a selected node or edge on Backspace *without*
reporting it — when that node or edge is deletable. Its clock may be ahead of the server's or behind it.

A value may reach Python late: after Python made more edits than the state it starts from (the user acted,
or the component answered, before Python's newer state arrived). Such a value never undoes those edits.
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

    def __init__(self, clock_offset_ms: int, answers: bool = True) -> None:
        self.answers = answers  # the package's build answers every state it takes; a patched one need not
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
            if remount:
                self.value = None  # a new component: nothing sent under its key yet
            self.key = ed.canvas_key
            self.nodes = [dict(n, data=dict(n["data"])) for n in nodes]
            self.edges = [dict(e) for e in edges]
            if self.answers:
                self.send()
            else:
                self.last_ts = ed.canvas_ts + 1

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


def graph(ed: Editor) -> tuple[set[str], set[tuple[str, str]]]:
    return {n["id"] for n in ed.nodes}, {(e["source"], e["target"]) for e in ed.edges}


PYTHON_EDITS = {"add", "delete", "py_connect", "disconnect", "undo", "redo", "layout"}


@settings(max_examples=60, deadline=None)
@given(actions=ACTIONS, offset=st.integers(-60_000, 60_000), answers=st.booleans(),
       late=st.lists(st.booleans(), min_size=25, max_size=25))
def test_random_edits_keep_the_canvas_and_the_spec_in_agreement(actions, offset, answers, late):
    """After each edit the two agree; a value the browser sends from the state before a Python edit (an
    answer, a click), read after that edit, leaves the edit as it was."""
    ed = Editor()
    comp = FakeComponent(offset, answers)
    settle(ed, comp)
    assert_agree(ed, comp)
    for k, (action, i, j) in enumerate(actions):
        step(ed, comp, action, i, j)
        if action in PYTHON_EDITS and k < len(late) and late[k] and comp.key == ed.canvas_key:
            edited = graph(ed)
            comp.send()  # from the state before the edit, which the browser still shows
            ed.apply_canvas_value(comp.value)
            assert graph(ed) == edited, f"a late value undid the Python edit {action}"
        settle(ed, comp)
        assert_agree(ed, comp)


def _browser_value(nodes: list[dict[str, Any]], edges: list[dict[str, Any]], ts: int,
                   selected: str | None = None) -> dict[str, Any]:
    return {"nodes": [dict(n) for n in nodes], "edges": [dict(e) for e in edges], "selectedId": selected,
            "timestamp": ts}


def _sent(ed: Editor) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the page sends the canvas (it is drawn), as the browser gets it."""
    nodes, edges = canvas.payload(ed)
    return json.loads(json.dumps(nodes)), json.loads(json.dumps(edges))


def test_a_late_value_keeps_what_python_added_and_removed_since_its_state():
    """The data-loss race: the canvas's answer to an older state, read after newer Python edits (a node from the
    palette, a connection and a removal from the side form), applied as the whole truth, dropped the new node
    and edge and brought back the removed one."""
    ed = Editor()
    relu = ed.add_node("ReLU")
    ed.connect("input", relu)
    old_nodes, old_edges = _sent(ed)  # the state the browser shows
    ed.connect(relu, "output")
    ed.disconnect("input", relu)
    flatten = ed.add_node("Flatten")
    _sent(ed)  # sent, but the browser's value below starts from the state before
    late = _browser_value(old_nodes, old_edges, canvas_now() + 5)
    assert ed.apply_canvas_value(late)
    assert ed.has_node(flatten), "the node added from the palette was dropped"
    assert graph(ed)[1] == {(relu, "output")}, "an edge added or removed in Python was undone"
    assert not ed.notices_in("graph"), "no message about nodes Python itself added or removed"
    assert ed.canvas_ts > late["timestamp"], "Python's state is sent again, newer than the browser's"


def test_what_the_user_did_on_an_older_state_is_kept_beside_python_edits():
    """A connection drawn and a node dragged on the state the browser showed, reaching Python after a side-form
    edit: both the user's change and Python's stay."""
    ed = Editor()
    relu, tanh = ed.add_node("ReLU"), ed.add_node("Tanh")
    nodes, edges = _sent(ed)
    ed.connect(relu, "output")  # the side form, while the user draws on the canvas
    _sent(ed)
    edges = [*edges, {"id": edge_id("input", tanh), "source": "input", "target": tanh}]
    nodes = [dict(n, position={"x": 999.0, "y": 5.0}) if n["id"] == tanh else n for n in nodes]
    ed.apply_canvas_value(_browser_value(nodes, edges, canvas_now() + 5, selected=edge_id("input", tanh)))
    assert graph(ed)[1] == {(relu, "output"), ("input", tanh)}
    assert ed.node(tanh)["position"] == {"x": 999.0, "y": 5.0}
    assert ed.node(relu)["position"] == next(n["position"] for n in nodes if n["id"] == relu)
    ed.undo()  # the connection drawn in the browser is one step
    assert graph(ed)[1] == {(relu, "output")}


def test_a_drag_is_sent_with_the_next_state_and_not_taken_back():
    """The canvas's nodes are cached per revision: a drag (no new revision) followed by a state sent again
    (a refused edge) sent the node back where it was before the drag."""
    ed = Editor()
    relu = ed.add_node("ReLU")
    nodes, edges = _sent(ed)
    moved = [dict(n, position={"x": 321.0, "y": 12.0}) if n["id"] == relu else n for n in nodes]
    ed.apply_canvas_value(_browser_value(moved, edges, canvas_now() + 5))
    loop = [*edges, {"id": edge_id(relu, relu), "source": relu, "target": relu}]
    ed.apply_canvas_value(_browser_value(moved, loop, canvas_now() + 10))  # refused: sent again
    again, _ = _sent(ed)
    assert next(n["position"] for n in again if n["id"] == relu) == {"x": 321.0, "y": 12.0}


def test_keyboard_delete_is_off_for_every_node_and_edge():
    """The component deletes on Backspace only what is deletable: nothing the canvas is sent."""
    ed = Editor()
    relu = ed.add_node("ReLU")
    ed.connect("input", relu)
    nodes, edges = canvas.payload(ed)
    assert nodes and all(n["deletable"] is False for n in nodes)
    assert edges and all(e["deletable"] is False for e in edges)
