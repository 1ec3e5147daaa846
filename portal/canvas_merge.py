"""A value read back from the canvas, merged into the editor's document (:meth:`Editor.apply_canvas_value`).

Python is the authority for everything except positions: the canvas only reports what the user did (a new
edge, a deleted node, a drag), and :func:`apply_canvas_value` turns that into the same edits the side form
and the palette make, so a cycle drawn in the browser is refused exactly like one made from the form.

Why the merge is not "the browser's value is the graph" (``docs/streamlit-flow.md``): a value may start from
an older state than the one Python sent last. The user acted, or the component answered, before Python's
newer state reached the browser, and Python made more edits (a side-form connection, a palette add, a
removal) before reading it. Applied as the whole truth such a late value dropped the node or edge Python
had just added and brought back one it had removed. So:

- every node is sent tagged with the timestamp of its state (:data:`SENT_KEY` in the node's data, which the
  component gives back untouched; portal/canvas.py), and the editor keeps what its last
  :data:`SENT_STATES_KEPT` states held (:class:`SentState`, :func:`remember_sent`);
- only what the browser changed *relative to the state the value starts from* (:func:`_base_of`) is
  applied: edges drawn, nodes moved (and nodes and edges deleted, were the canvas to report it; it is sent
  with keyboard deletion off, portal/canvas.py). A node or an edge Python added since stays; one Python
  removed since stays removed;
- a value from an older state than the last one sent, or one whose canvas shows something Python refused or
  does not hold, has Python's state sent again (:meth:`Editor._resend`).

``tests/portal/test_canvas_sync.py`` has the race (random browser and Python edits, values arriving late).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portal.editor_blocks import is_port

if TYPE_CHECKING:
    from portal.editor_state import Editor

SENT_KEY = "ft_sent"  # in each node's data as sent: the timestamp of the state it was sent with
SENT_STATES_KEPT = 16  # the states a late value may start from; an older one is applied as changing nothing


@dataclass(frozen=True)
class SentState:
    """What one state sent to the canvas held: the base a value starting from it is compared with."""

    nodes: frozenset[str]
    edges: frozenset[tuple[str, str]]
    positions: dict[str, tuple[float, float]]


def remember_sent(ed: Editor, positions: dict[str, dict[str, float]]) -> None:
    """Keep what the state under :attr:`Editor.canvas_ts` holds (once: what the browser's values from it
    start from); the oldest beyond :data:`SENT_STATES_KEPT` are forgotten."""
    if ed.canvas_ts in ed._sent_states:
        return
    ed._sent_states[ed.canvas_ts] = SentState(
        frozenset(positions), frozenset((e["source"], e["target"]) for e in ed.edges),
        {i: (float(p["x"]), float(p["y"])) for i, p in positions.items()})
    for old in sorted(ed._sent_states)[:-SENT_STATES_KEPT]:
        del ed._sent_states[old]


def _apply_click(ed: Editor, sel: Any, pick: Any) -> None:
    """Select the node the user clicked. The served component (portal/flow_component.py) sends the last click with
    every value (``lastSelected``: id and moment), applied once by its moment: a click that reached Streamlit in the
    same batch as a later answer (``selectedId`` null) arrives with that answer. Without it (a value made by a test),
    the value's own ``selectedId``."""
    if isinstance(pick, dict) and isinstance(pick.get("id"), str) and isinstance(pick.get("ts"), (int, float)):
        if int(pick["ts"]) != ed.last_pick_ts:
            ed.last_pick_ts = int(pick["ts"])
            if ed.has_node(pick["id"]):
                ed.selected = pick["id"]
    elif isinstance(sel, str) and ed.has_node(sel):
        ed.selected = sel


def apply_canvas_value(ed: Editor, value: Any) -> bool:
    """Apply what the component returned under the current key; False when already applied or stale.

    Positions are taken from the browser; additions, deletions and new edges go through the
    same checks as Python-side edits (cycles refused, dangling edges dropped, nodes without a
    layer type refused). Only what the browser changed relative to the state the value starts from
    (:func:`_base_of`) is applied: Python's edits made since that state was sent stay.
    """
    if not isinstance(value, dict):
        return False
    ts, sel = value.get("timestamp"), value.get("selectedId")
    # Streamlit hands the last value back on every rerun: applied once. Not by timestamp alone: one
    # click on a node sends two values (the drag stop, then the click with its selectedId) that can
    # carry the same millisecond, and the click read as "already applied" was lost.
    if not isinstance(ts, (int, float)) or (ts, sel) == (ed.last_event_ts, ed.last_event_sel):
        return False
    ed.last_event_ts, ed.last_event_sel = int(ts), sel
    _apply_click(ed, sel, value.get("lastSelected"))

    raw_nodes = [n for n in value.get("nodes") or [] if isinstance(n, dict) and isinstance(n.get("id"), str)]
    raw_edges = [e for e in value.get("edges") or [] if isinstance(e, dict)]
    wanted: list[tuple[str, str]] = []
    for raw in raw_edges:
        src, tgt = raw.get("source"), raw.get("target")
        if isinstance(src, str) and isinstance(tgt, str):
            wanted.append((src, tgt))
    wanted = list(dict.fromkeys(wanted))  # the component ignores duplicates; so does the editor
    base, python_fix = _base_of(ed, raw_nodes, wanted)
    browser_ids = {n["id"] for n in raw_nodes}
    current_ids = {n["id"] for n in ed.nodes}
    current = [(e["source"], e["target"]) for e in ed.edges]
    gone_nodes = [i for i in current_ids if i in base.nodes and i not in browser_ids]
    wanted_set = set(wanted)
    gone_edges = [p for p in current if p in base.edges and p not in wanted_set]
    structural = bool(gone_nodes or gone_edges or any(p not in base.edges for p in wanted))
    before = json.dumps(ed.doc) if structural else None  # the undo step, if the value changes the graph

    for node_id in gone_nodes:  # deleted in the browser
        if is_port(ed.node(node_id)):
            python_fix = True  # a block's input port stays (it is the block's interface)
        else:
            ed._drop_node(node_id)
    by_id = {n["id"]: n for n in ed.nodes}
    for raw in raw_nodes:
        if raw["id"] not in by_id:
            if raw["id"] not in base.nodes and raw["id"] not in current_ids:
                content = str((raw.get("data") or {}).get("content", ""))[:40]
                ed.notice("warning", f"Removed the node {content or raw['id']!r}: nodes made with the canvas "
                                     "menu have no layer type. Add layers from the palette.", topic="graph.canvas")
            python_fix = True  # a node made in the browser, or one Python deleted since: not shown any more
            continue
        pos = raw.get("position")
        if isinstance(pos, dict) and isinstance(pos.get("x"), (int, float)) and isinstance(pos.get("y"), (int, float)):
            xy = (float(pos["x"]), float(pos["y"]))
            if base.positions.get(raw["id"]) != xy:  # moved in the browser
                by_id[raw["id"]]["position"] = {"x": xy[0], "y": xy[1]}

    for src, tgt in gone_edges:  # deleted in the browser
        ed._drop_edge(src, tgt)
    added, fix = _add_canvas_edges(ed, wanted, base, by_id)
    python_fix |= fix

    if before is not None and (added or gone_edges or len(by_id) < len(current_ids)):
        ed._snapshot(before)
        ed.rev += 1
    shows = {n["id"]: (n.get("data") or {}).get("content") for n in raw_nodes}
    if any(shows.get(i, c) != c for i, c in ed._sent_contents.items()) or \
            any(e.get("label") for e in raw_edges):
        python_fix = True  # the browser shows other text than Python sent (it missed an update, or a menu)
    if python_fix or (ed.canvas_ts <= ed.last_event_ts and ed.canvas_ts not in ed._sent_states):
        ed._resend()  # (or: Python's state, not sent yet, would look older to the browser than its own)
    return True


def _add_canvas_edges(ed: Editor, wanted: list[tuple[str, str]], base: SentState,
                      by_id: dict[str, Any]) -> tuple[bool, bool]:
    """Add the edges drawn in the browser (those not in the state the value starts from), through the
    same checks as the side form's Connect. Returns whether one was added, and whether the browser must
    be sent Python's state again (it shows an edge Python refused or removed)."""
    added = python_fix = False
    current = {(e["source"], e["target"]) for e in ed.edges}
    for src, tgt in wanted:
        if (src, tgt) in current:
            continue
        if src not in by_id or tgt not in by_id:
            python_fix = True  # dangling after a deletion: drop it
        elif (src, tgt) in base.edges:
            python_fix = True  # removed by Python since that state was sent: it stays removed
        else:
            reason = ed.refusal(src, tgt)
            if reason is None:
                ed._add_edge(src, tgt)
                current.add((src, tgt))
                added = True
            else:
                ed._refused_edge(reason)
                python_fix = True
    return added, python_fix


def _base_of(ed: Editor, raw_nodes: list[dict[str, Any]], wanted: list[tuple[str, str]]) -> tuple[SentState, bool]:
    """The state a value from the browser starts from, and whether it is older than the last one sent.

    Its nodes carry :data:`SENT_KEY`, the timestamp of the state the component took last. A value without
    nodes starts from the last empty graph sent, if one is kept (a palette add goes to the same component: a
    late value from the empty canvas before it must not drop the new node). Another value without it (a value
    made up by a test) is compared with Python's graph as it is now, so it says everything the browser shows;
    one from a state no longer kept changes nothing."""
    tags = {(n.get("data") or {}).get(SENT_KEY) for n in raw_nodes} - {None}
    tag = max((t for t in tags if isinstance(t, int)), default=None)
    empty = [ts for ts, sent in ed._sent_states.items() if not sent.nodes]
    if tag is None and not raw_nodes and empty:
        return ed._sent_states[max(empty)], max(empty) != max(ed._sent_states)
    if tag is None:
        return SentState(frozenset(n["id"] for n in ed.nodes),
                         frozenset((e["source"], e["target"]) for e in ed.edges), {}), False
    latest = max(ed._sent_states, default=None)
    base = ed._sent_states.get(tag)
    if base is None:
        return SentState(frozenset(n["id"] for n in raw_nodes), frozenset(wanted), {
            n["id"]: (float(n["position"]["x"]), float(n["position"]["y"])) for n in raw_nodes
            if isinstance(n.get("position"), dict) and isinstance(n["position"].get("x"), (int, float))
            and isinstance(n["position"].get("y"), (int, float))}), True
    return base, tag != latest
