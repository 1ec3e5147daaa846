"""The editor page's parts for composite blocks: the block bar over the canvas (the blocks to open,
or which block is open, with the way back), the palette's blocks, and the side form's block parts.

Drawing only: every edit goes through the editor (:class:`portal.editor_blocks.BlockEdits`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.ops import Param
from portal.editor_blocks import BLOCK_TOPIC, bound_to, is_port
from portal.editor_state import Editor
from portal.forms import PARAM_PREFIX, STALE, field_messages, shown_value, wkey
from portal.session import reset_widgets


def _open(ed: Editor, name: str) -> None:
    ed.open_block(name)
    reset_widgets("editor.")


def _close(ed: Editor, depth: int) -> None:
    ed.close_block(depth)
    reset_widgets("editor.")


def _describe_params(block: dict[str, Any]) -> str:
    return ", ".join(f"`{p['name']}` ({p['type']}, default {p['default']!r})" for p in block["params"]) or "none"


def block_bar(ed: Editor) -> None:
    """Over the canvas: with a block open, where the canvas is (a breadcrumb), the way back and what
    the block is; otherwise the pipeline's blocks, each with a button that opens it."""
    name = ed.open_block_name
    if name is None:
        if not ed.blocks:
            return
        st.markdown("**Blocks** (each use is one node; open a block to edit every use at once)")
        cols = st.columns(min(len(ed.blocks), 4))
        for i, b in enumerate(ed.blocks):
            n = len(ed.uses(b["name"]))
            cols[i % len(cols)].button(f"Open {b['name']}", key=f"editor.block.open.{b['name']}", on_click=_open,
                                       args=(ed, b["name"]), help=f"{b.get('description') or b['name']}: used by {n} "
                                       f"node{'s' * (n != 1)}.")
        return
    block = ed.graph
    crumbs = " › ".join(["Pipeline", *ed.open_path[:-1], f"**{name}**"])
    st.info(f"Editing the block {crumbs}")
    back, up, _ = st.columns([2, 2, 3], vertical_alignment="center")
    back.button("← Back to pipeline", key="editor.block.back", on_click=_close, args=(ed, 0), type="primary")
    if len(ed.open_path) > 1:
        up.button(f"↑ Up to {ed.open_path[-2]}", key="editor.block.up", on_click=_close,
                  args=(ed, len(ed.open_path) - 1))
    uses = ed.uses(name)
    shown = ", ".join(f"{u}" + (f" (in {where})" if where else "") for where, u in uses[:8])
    more = f", … ({len(uses)} in all)" if len(uses) > 8 else ""
    st.caption(f"{block.get('description') or ''} Used by {len(uses)} node{'s' * (len(uses) != 1)}: "
               f"{shown or 'none yet'}{more}. **A change here changes every use.** Inputs: "
               f"{', '.join(block['inputs'])} · output: {block['output']} · parameters: {_describe_params(block)}."
               + (f" Shapes shown are those of {uses[0][1]}." if ed.shapes_use() else ""))


def palette_blocks(ed: Editor, add: Any) -> None:
    """The palette's blocks: each button adds a use of one (the open block itself is left out)."""
    names = [b["name"] for b in ed.blocks if b["name"] not in ed.open_path]
    if not names:
        return
    with st.expander("Blocks", expanded=True):
        for name in names:
            block = ed.block(name) or {}
            st.button(f"▣ {name}", key=f"palette.block.{name}", on_click=add, args=(ed, name), width="stretch",
                      help=f"Add a use of the block {name}. {block.get('description') or ''}")


def use_header(ed: Editor, node_id: str, block: dict[str, Any]) -> None:
    """The side form's head for a use of a block: what it is, and the button that opens the block."""
    st.markdown(f"**▣ {block['name']}** (block) · `{node_id}`")
    n = len(ed.uses(block["name"]))
    st.caption(f"{block.get('description') or 'A composite block'}. Its parameters are below; the block's "
               f"nodes are edited by opening it (a change there changes all {n} use{'s' * (n != 1)}).")
    st.button(f"Open block {block['name']}", key="editor.open_block", on_click=_open, args=(ed, block["name"]))


def _on_text(ed: Editor, node_id: str, name: str, key: str) -> None:
    value = shown_value(ed, key)
    if value is STALE or not ed.has_node(node_id):
        return
    ed.set_param(node_id, name, str(value))


def text_params(ed: Editor, node_id: str, block: dict[str, Any]) -> None:
    """A use's text (``str``) parameters: any text is a value."""
    params = ed.node(node_id)["data"].get("params") or {}
    for p in block["params"]:
        if p["type"] != "str":
            continue
        key = wkey(ed, f"{PARAM_PREFIX}{node_id}.{p['name']}")
        st.text_input(p["name"], value=str(params.get(p["name"], p["default"])), key=key, max_chars=2000,
                      on_change=_on_text, args=(ed, node_id, p["name"], key), help=p.get("description") or None)


def bound_param(ed: Editor, node_id: str, prm: Param, value: Any) -> None:
    """An inner node's parameter bound to a block parameter: say so, and offer to unbind it."""
    block = ed.graph
    name = bound_to(value)
    decl = next((p for p in block.get("params") or [] if p["name"] == name), None)
    text, button = st.columns([4, 2], vertical_alignment="center")
    what = f"({decl['type']}, default {decl['default']!r})" if decl else "(no such block parameter: unbind it)"
    text.markdown(f"`{prm.name}`  \n:blue[bound to block param **{name}**] {what}")
    button.button("Unbind", key=f"editor.unbind.{node_id}.{prm.name}", on_click=ed.bind_param,
                  args=(node_id, prm.name, None), disabled=decl is None,
                  help="Give this parameter a fixed value (the block parameter's default) in every use.")
    field_messages(ed, f"{PARAM_PREFIX}{node_id}.{prm.name}", None)


def _bind(ed: Editor, node_id: str) -> None:
    param = st.session_state.get(f"editor.bind.param.{node_id}")
    to = st.session_state.get(f"editor.bind.to.{node_id}")
    if param and to and ed.has_node(node_id):
        ed.bind_param(node_id, param, to)
        reset_widgets(f"{PARAM_PREFIX}{node_id}.")


def inner_node_extras(ed: Editor, node_id: str, declared: list[Param]) -> None:
    """For a node of the open block: whether it is the block's output, and binding a parameter to a
    block parameter (every use then sets it)."""
    block = ed.graph
    if block.get("output") == node_id:
        st.caption("⇥ This node's output is the block's output.")
    else:
        st.button("Make this the block's output", key="editor.block_output", on_click=ed.set_block_output,
                  args=(node_id,))
    params = ed.node(node_id)["data"].get("params") or {}
    free = [p.name for p in declared if bound_to(params.get(p.name)) is None]
    if block.get("params") and free:
        with st.expander("Bind a parameter to a block parameter"):
            # keyed by the node: another node has other parameters to choose from
            st.selectbox("Parameter", free, key=f"editor.bind.param.{node_id}")
            st.selectbox("Block parameter", [p["name"] for p in block["params"]], key=f"editor.bind.to.{node_id}")
            st.button("Bind", key="editor.bind", on_click=_bind, args=(ed, node_id))


def port_form(ed: Editor, node_id: str) -> None:
    """The side form of a block's input port (part of the block's interface: not deleted here)."""
    block = ed.graph
    index = block["inputs"].index(node_id) if node_id in block["inputs"] else 0
    st.markdown(f"**Input port {index}** · `{node_id}` of block **{block['name']}**")
    st.caption(f"A use's incoming connection number {index} (in port order) arrives here. Connect it to the "
               "block's first nodes by dragging from its bottom handle.")
    targets = [e["target"] for e in ed.edges if e["source"] == node_id]
    st.markdown("Feeds: " + (", ".join(f"`{t}`" for t in targets) or "nothing yet"))


def _make(ed: Editor) -> None:
    ids = list(st.session_state.get("editor.make.nodes") or [])
    name = (st.session_state.get("editor.make.name") or "").strip()
    why = ed.make_block(ids, name)
    if why:
        ed.notice("error", f"Could not make the block: {why}", topic=BLOCK_TOPIC)
        return
    ed.notice("success", f"Made the block {name} from {', '.join(ids)}; {ed.selected} uses it. Open it to "
                         "edit it, or add more uses from the palette.", topic=BLOCK_TOPIC)
    reset_widgets("editor.")


def make_block_form(ed: Editor) -> None:
    """Choose nodes of the graph shown and a name: they become a new block, used once in their place."""
    candidates = [n["id"] for n in ed.nodes if not is_port(n) and n["data"].get("op") not in ("Input", "Output")]
    if len(candidates) < 1:
        return
    with st.expander("Make a block from nodes"):
        st.multiselect("Nodes", candidates, key="editor.make.nodes", placeholder="choose the nodes…",
                       help="Connected nodes with one node that feeds the rest of the graph (the block's output).")
        st.text_input("Block name", key="editor.make.name", placeholder="e.g. conv_bn_relu",
                      help="Letters, digits and _, not starting with a digit.")
        st.button("Make block", key="editor.make", on_click=_make, args=(ed,))
