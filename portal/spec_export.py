"""Export the editor's pipeline as a spec file at any time, valid or not.

A valid pipeline gives the spec as the command line reads it. An invalid one is exported all the same
(nothing the user typed is lost), with its problems listed under ``"problems"`` at the top of the file:
the file then names what to fix, and the editor's import reads it back after the problems are fixed
(the list itself is dropped on import, see :func:`strip_problems`).
"""

from __future__ import annotations

import json
from typing import Any

from core.errors import Problem
from core.extract import PORT_ORDER_KEY
from core.spec import SCHEMA_VERSION
from portal.editor_blocks import block_from_canvas
from portal.editor_state import Editor

PROBLEMS_KEY = "problems"


def _raw_model(doc: dict[str, Any]) -> dict[str, Any]:
    """The graph as the spec writes it, read straight from the document (when the extractor cannot)."""
    nodes = []
    for n in doc.get("nodes") or []:
        data = n.get("data") or {}
        node = {"id": n.get("id"), "op": data.get("op"), "params": data.get("params") or {}}
        if data.get("label"):
            node["label"] = data["label"]
        if isinstance(n.get("position"), dict):
            node["position"] = n["position"]
        nodes.append(node)
    orders = {n.get("id"): (n.get("data") or {}).get(PORT_ORDER_KEY) for n in doc.get("nodes") or []}
    edges = []
    for e in doc.get("edges") or []:
        edge = {"source": e.get("source"), "target": e.get("target")}
        order = orders.get(e.get("target"))
        if isinstance(order, list) and e.get("source") in order:
            edge["port"] = order.index(e.get("source"))
        edges.append(edge)
    return {"nodes": nodes, "edges": edges, "blocks": [block_from_canvas(b) for b in doc.get("blocks") or []]}


def export_document(ed: Editor) -> tuple[str, list[Problem]]:
    """The spec file's text and the problems it carries (none for a valid pipeline)."""
    problems = ed.problems()
    ext = ed.extraction()
    if ext.spec is not None:
        out: dict[str, Any] = json.loads(ext.spec.to_json())
    else:
        doc = ed.doc
        out = {"schema_version": SCHEMA_VERSION, "name": doc.get("name") or "pipeline",
               "description": doc.get("description") or "", "data": doc.get("data") or {},
               "model": _raw_model(doc), "training": doc.get("training") or {}}
    if problems:
        out = {PROBLEMS_KEY: [str(p) for p in problems], **out}
    return json.dumps(out, indent=2), problems


def strip_problems(text: str | bytes) -> tuple[str | bytes, int]:
    """An exported file's text without its ``"problems"`` list (and how many it listed), so that a file
    exported while invalid imports once fixed; any other file is returned as it is."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # the spec reader says what is wrong with it
        return text, 0
    if not isinstance(doc, dict) or not isinstance(doc.get(PROBLEMS_KEY), list):
        return text, 0
    listed = len(doc.pop(PROBLEMS_KEY))
    return json.dumps(doc), listed
