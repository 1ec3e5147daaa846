"""Each node as the canvas shows it (:meth:`Editor.canvas_payload`): its text and a style that says its state.

The text is Markdown with every user-given character escaped (``param_text.md_text``), so a label is text
and never HTML, a link, an image or math. A block's use is drawn as one node of its own style; inside an
open block, its ports and output are marked and the shapes are those of its first use in the pipeline.
A node's first problem is shown on it, cut to :data:`PROBLEM_CHARS`; the side form has all of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.validate import Analysis
from portal.editor_blocks import PORT_STYLE, USE_STYLE, is_port
from portal.graph_layout import NODE_STYLE
from portal.param_text import md_text, param_summary

if TYPE_CHECKING:
    from portal.editor_state import Editor

PROBLEM_CHARS = 60  # of a node's first problem, on the node (two lines)


def decorate(ed: Editor, analysis: Analysis | None) -> list[dict[str, Any]]:
    """Each node of the graph shown (:attr:`Editor.graph`) as the canvas shows it; ``analysis``: the
    editor's, of this revision (its shapes)."""
    open_name = ed.open_block_name
    problems = ed.graph_problems()
    out = []
    for n in ed.nodes:
        data = n["data"]
        if is_port(n):
            out.append({**n, "data": {**data, "content": f"**input port** {md_text(n['id'])}"}, "style": PORT_STYLE})
            continue
        op = str(data.get("op", "?"))
        node_id = n["id"]
        label = data.get("label")
        block = ed.block(op)
        kind = f"▣ {md_text(op)}" if block is not None else md_text(op)
        lines = [f"**{md_text(str(label))}** ({kind})" if label else f"**{kind}** {md_text(node_id)}"]
        shown = param_summary(op, data.get("params") or {}, block)
        if shown:
            lines.append(shown)
        key = ed.info_key(node_id)
        info = (analysis.uses.get(key) or analysis.nodes.get(key)) if analysis and key else None
        if ed.multi_input(op):
            order = ed.incoming(node_id)
            if order:
                lines.append("ports: " + ", ".join(f"{i}:{md_text(s)}" for i, s in enumerate(order)))
        mine = problems.get(node_id)
        if info is not None:
            lines.append(f"→ {md_text(str(info.output))}")
        if open_name and node_id == ed.graph.get("output"):
            lines.append("⇥ **output of the block**")
        if mine:
            message = mine[0].message
            lines.append("⚠ " + md_text(message if len(message) <= PROBLEM_CHARS else
                                        message[:PROBLEM_CHARS - 1] + "…"))
            style = {**NODE_STYLE, "border": "2px solid #d62728", "background": "#fdecea"}
        elif block is not None:
            style = dict(USE_STYLE)
        elif info is not None or open_name:
            style = {**NODE_STYLE, "border": "1px solid #555", "background": "#ffffff"}
        else:
            style = {**NODE_STYLE, "border": "1px dashed #999", "background": "#f7f7f7"}
        if block is not None and mine:
            style["border"] = "3px double #d62728"
        out.append({**n, "data": {**data, "content": "  \n".join(lines)}, "style": style})
    return out
