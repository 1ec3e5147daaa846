"""The canvas component: streamlit-flow-component's own build, patched so that it does not answer the
states Python sends it and draws only what changed.

The component (1.6.1, pinned in requirements.txt) answers every state it takes twice, each answer the
whole graph sent back and a script run: once when it takes the state, once after its layout run (ELK
"fixed", which moves nothing). Python learns nothing from them (they show what it sent), yet an edit
on a 500-node graph paid for two more runs and 2 × 300 KB each way, and the page was not settled until
they were done (docs/performance.md). And every state it took drew every node anew (a node's text is
Markdown, rendered by react-markdown) when one node of 500 had changed. Three pieces of its minified
JavaScript are replaced (:data:`PATCHES`) and one function is put before it (:data:`PRELUDE`):

- taking Python's state, it keeps Python's timestamp (+ 1) as its own last update (it kept the
  browser's clock, and only its answer told Python that clock) and sends nothing; a node or edge that
  is as it was (in everything Python sends but the state's tag, ``SENT_KEY``) stays the same object, so
  React Flow draws only what changed (the kept node's tag is brought up to date in place, so what the
  browser sends back names the newest state);
- its layout step with ManualLayout's ELK "fixed" (which keeps every position) does not run ELK (built
  anew and given every node for each state);
- after its layout step it sends nothing (it still fits the view when told to).

What the user does (a connection, a drag, a click) is sent as before, with the browser's clock: Python
sends its next state newer than that (``Editor._resend``).

The patched build is a copy of the package's build folder in a private temporary folder of this
process, registered under the component's own name (so the iframe is still titled
``streamlit_flow.streamlit_flow``), its bundle under a new name (a browser may hold the old one in its
cache). If the installed bundle is not the one the patches were written for, the package's build is
used as it is, with a warning in the log: slower, not wrong (tests/portal/test_canvas_component.py
fails then).
"""

from __future__ import annotations

import atexit
import logging
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import streamlit_flow
from streamlit.components.v1.custom_component import CustomComponent
from streamlit.runtime import get_instance
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from portal.editor_state import SENT_KEY

LOG = logging.getLogger(__name__)
NAME = "streamlit_flow.streamlit_flow"  # the package's own: declare_component("streamlit_flow") in streamlit_flow
BUILD = Path(streamlit_flow.__file__).resolve().parent / "frontend" / "build"
SUFFIX = ".ft1"  # the patched bundle's name: main.<hash>.ft1.js

# __ftKeep(prev, next): ``next`` (as Python sent it) with each element that equals its namesake in ``prev`` in
# every key ``next`` has (the state's tag left out) replaced by that ``prev`` object, its tag brought up to date.
PRELUDE = """window.__ftKeep=function(prev,next){
  var sig=function(v){return JSON.stringify(v,function(k,x){return k==="__TAG__"?void 0:x;});};
  var by=new Map();(prev||[]).forEach(function(p){by.set(p.id,p);});
  return next.map(function(n){
    var p=by.get(n.id);if(!p)return n;
    for(var k in n){if(sig(p[k])!==sig(n[k]))return n;}
    if(n.data&&p.data&&("__TAG__" in n.data))p.data["__TAG__"]=n.data["__TAG__"];
    return p;});
};
""".replace("__TAG__", SENT_KEY)

# (what the bundle says, what it says instead): each must occur exactly once.
PATCHES = (
    # the state Python sent, taken: unchanged nodes (i) and edges (s) kept; l (its last update) := Python's
    # timestamp + 1 (the same state sent again, as Streamlit does when the frame's height changes, is not taken
    # twice); no answer (N)
    ("(0,f.useEffect)((()=>{l<=e.args.timestamp&&(b(!0),a(e.args.nodes),c(e.args.edges),h((new Date).getTime()),"
     "N(e.args.nodes,e.args.edges,null))}),[e.args.nodes,e.args.edges])",
     "(0,f.useEffect)((()=>{l<=e.args.timestamp&&(b(!0),a(window.__ftKeep(i,e.args.nodes)),"
     "c(window.__ftKeep(s,e.args.edges)),h(e.args.timestamp+1))}),[e.args.nodes,e.args.edges])"),
    # ELK "fixed" (ManualLayout) keeps every position: not run
    ("const JD=async(e,t,n)=>{const r=",
     'const JD=async(e,t,n)=>{if(n.elkOptions&&n.elkOptions["elk.algorithm"]==="org.eclipse.elk.fixed")'
     "return{nodes:[...e],edges:[...t]};const r="),
    # after the layout step: nodes and edges kept, the view fitted again when fitView is on; no answer
    ("let{nodes:t,edges:n}=e;a(t),c(n),r(!1),N(t,n,null),g(!0)",
     "let{nodes:t,edges:n}=e;a(t),c(n),r(!1),g(!0)"),
)


def patched(source: str) -> str | None:
    """The bundle with :data:`PATCHES` applied and :data:`PRELUDE` before it, or None when it is not the
    bundle they were written for."""
    for old, new in PATCHES:
        if source.count(old) != 1:
            return None
        source = source.replace(old, new)
    return PRELUDE + source


@cache
def build_folder() -> Path:
    """The folder the component is served from: a patched copy of the package's build (once per process)."""
    index = (BUILD / "index.html").read_text(encoding="utf-8")
    found = re.search(r'src="\./static/js/(main\.[0-9a-f]+)\.js"', index)
    bundle = BUILD / "static" / "js" / f"{found.group(1)}.js" if found else None
    text = patched(bundle.read_text(encoding="utf-8")) if bundle is not None and bundle.is_file() else None
    if found is None or bundle is None or text is None:
        LOG.warning("streamlit-flow's bundle in %s is not the one portal/canvas_component.py patches (1.6.1): "
                    "the canvas answers every state twice and draws every node anew, as unpatched", BUILD)
        return BUILD
    folder = Path(tempfile.mkdtemp(prefix="flowtrain-canvas-"))  # private (0700), this process's own
    atexit.register(shutil.rmtree, folder, True)
    shutil.copytree(BUILD, folder / "build", ignore=shutil.ignore_patterns(bundle.name, "*.map"))
    name = f"{found.group(1)}{SUFFIX}.js"
    (folder / "build" / "static" / "js" / name).write_text(text, encoding="utf-8")
    (folder / "build" / "index.html").write_text(index.replace(f"./static/js/{bundle.name}", f"./static/js/{name}"),
                                                 encoding="utf-8")
    return folder / "build"


@cache
def component() -> CustomComponent:
    """The component to call, served from :func:`build_folder` under the package's own name."""
    return CustomComponent(name=NAME, path=str(build_folder()), url=None, module_name="streamlit_flow")


def render(**kwargs: Any) -> Any:
    """Draw the component (``streamlit_flow._st_flow_func``'s arguments). It is registered whenever the
    registry (one per server; a stand-in in AppTest) serves another folder under its name: ``import
    streamlit_flow`` registers the package's own build there."""
    comp = component()
    if get_script_run_ctx() is not None:
        registry = get_instance().component_registry
        if registry.get_component_path(NAME) != comp.abspath:
            registry.register_component(comp)
    return comp(**kwargs)
