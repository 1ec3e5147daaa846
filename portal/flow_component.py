"""The canvas component: streamlit-flow-component's own build, served with one small script added to its page and
two effects of its bundle patched (it no longer answers the states Python sends).

Why (docs/streamlit-flow.md, "Values sent in one batch"): Streamlit's page gathers the widget values that reach it
within one turn of its event loop into one message, and a widget's value in that message is the *last* one it sent.
The component answers every state Python sends, twice (when it takes it, and after its layout), each answer with
``selectedId`` null. A click on a node that reached the page in the same turn as such an answer was therefore lost:
the answer replaced it, nothing was selected and no page run followed (a CI failure of the conv-net browser test:
"waited 60 s for a script run to end after the action").

The script wraps the component's one way out (``window.parent.postMessage``, which the component library calls for
every value): each value leaves carrying ``lastSelected``, the last node the user clicked and the moment of that
click (``{"id", "ts"}``), so an answer that replaces the click in a batch still delivers it. Each value also leaves
with only what Python reads of its nodes and edges (ids, positions, ``data.content`` and ``data.ft_sent``, the edges'
ends and labels): Streamlit sends a widget's last value with every later script run's request, and the component's
nodes carry their parameters, styles and React Flow's measurements (the bench graph's 500 nodes: about 356 KB,
122 KB trimmed). Python applies a click once, by its moment (:func:`portal.canvas_merge.apply_canvas_value`).

Edit latency (docs/performance.md, "Issue 21, edit latency: third pass"): the component as built answers every state
Python sends twice, unasked, each answer the whole graph and a script run (once when it takes the state, once after
ELK's layout, which it runs on every state and which for the portal's "fixed" layout moves nothing), and each state
replaces every node object, so React Flow draws every node again (twice: as sent, and as ELK returned them). Two of
its effects are therefore replaced (:data:`BUNDLE_PATCHES`, each found exactly once in the installed bundle, or the
portal says which version to install):

- taking a state: the nodes and edges that did not change stay the same objects (``__ftKeep`` in
  :data:`CLICK_SCRIPT`; only ``data.ft_sent``, the state's timestamp, is brought up to date on them), the state's
  timestamp becomes the component's last update (so the same state, handed again by every script run, is taken
  once), and nothing is sent back; a state sent with ``fitView`` has the view fitted once its nodes are measured
  (a palette add: the new node is in sight without a remount);
- after the mount or such a state: no ELK run (positions are Python's), only the view fitted when asked.

What the user does (a drag, a connection, a click) is sent as before. The patched bundle is served under a name of
its own (``main.<hash>.ft<digest>.js``): a browser that cached the installed one cannot run it instead.

The build is copied once per component version, script and patch into ``~/.cache/flowtrain/`` (``XDG_CACHE_HOME``),
the folder Streamlit then serves the component from.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import streamlit.components.v1 as components
import streamlit_flow

from core.errors import FlowTrainError

SOURCE = Path(streamlit_flow.__file__).resolve().parent / "frontend" / "build"
COMPONENT_VERSION = version("streamlit-flow-component")
NAME = "streamlit_flow"  # Streamlit prefixes this module: the iframe's title is "portal.flow_component.streamlit_flow"
MAIN_SCRIPT_TAG = '<script defer="defer" src="./static/js/main.'

# Runs before the component's bundle (which is deferred). An edge id in selectedId (a connection drawn) is not a
# click on a node and leaves the last click as it was. __ftKeep(old, incoming): the incoming nodes or edges, each one
# that equals the one already drawn (on the keys Python sends) replaced by it, its data.ft_sent brought up to date.
CLICK_SCRIPT = """<script>/* FlowTrain, portal/flow_component.py: every value carries the last node clicked */
(() => {
  const keys = ["position", "data", "sourcePosition", "targetPosition", "deletable", "style", "type", "source",
                "target", "markerEnd", "label", "animated", "sourceHandle", "targetHandle"];
  const text = v => JSON.stringify(v === undefined ? null : v);
  const same = (o, n) => keys.every(k => k === "data"
    ? text({...o.data, ft_sent: 0}) === text({...n.data, ft_sent: 0}) : text(o[k]) === text(n[k]));
  window.__ftKeep = (old, incoming) => {
    const drawn = new Map((old || []).map(o => [o.id, o]));
    return (incoming || []).map(n => {
      const o = drawn.get(n.id);
      if (!o || !same(o, n)) return n;
      if (o.data && n.data) o.data.ft_sent = n.data.ft_sent;
      return o;
    });
  };
  const page = window.parent;
  let last = null;
  window.parent = {postMessage(message, target) {
    const value = message && message.type === "streamlit:setComponentValue" ? message.value : null;
    if (value && typeof value === "object") {
      const sel = value.selectedId;
      if (typeof sel === "string" && !(value.edges || []).some(e => e && e.id === sel)) {
        last = {id: sel, ts: value.timestamp};
      }
      // only what Python reads (portal/canvas_merge.py): the value travels with every later script run's request
      const nodes = (value.nodes || []).map(n => n && typeof n === "object" ? {id: n.id, position: n.position,
        data: n.data ? {content: n.data.content, ft_sent: n.data.ft_sent} : n.data} : n);
      const edges = (value.edges || []).map(e => e && typeof e === "object"
        ? {id: e.id, source: e.source, target: e.target, ...(e.label ? {label: e.label} : {})} : e);
      message = {...message, value: {...value, nodes, edges, lastSelected: last}};
    }
    page.postMessage(message, target);
  }};
})();
</script>"""


# (installed, served): the component's effect that takes a state from Python, and the one that runs ELK's layout
# once the nodes are measured (after the mount, and after each state taken). See the module's docstring.
BUNDLE_PATCHES = (
    ("(0,f.useEffect)((()=>{l<=e.args.timestamp&&(b(!0),a(e.args.nodes),c(e.args.edges),h((new Date).getTime()),"
     "N(e.args.nodes,e.args.edges,null))}),[e.args.nodes,e.args.edges])",
     "(0,f.useEffect)((()=>{l<e.args.timestamp&&(e.args.fitView&&b(!0),a(window.__ftKeep(i,e.args.nodes)),"
     "c(window.__ftKeep(s,e.args.edges)),h(e.args.timestamp))}),[e.args.nodes,e.args.edges])"),
    ("T&&!p&&JD(x(),C(),e.args.layoutOptions).then((e=>{let{nodes:t,edges:n}=e;a(t),c(n),r(!1),N(t,n,null),g(!0)}))"
     ".catch((e=>console.log(e)))",
     "T&&!p&&(r(!1),g(!0))"),
)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flowtrain"


def served_build(root: Path) -> Path:
    """The folder Streamlit serves the component from: the installed build with :data:`CLICK_SCRIPT` in its page and
    its bundle patched (:data:`BUNDLE_PATCHES`). Made once (copied into a temporary folder, then renamed into place:
    two portals starting together cannot serve a half-copied folder)."""
    index = (SOURCE / "index.html").read_text(encoding="utf-8")
    found = re.findall(r'<script defer="defer" src="\./static/js/(main\.[0-9a-f]+\.js)"', index)
    if index.count(MAIN_SCRIPT_TAG) != 1 or len(found) != 1:
        raise _unexpected(f"its page ({SOURCE / 'index.html'}) does not load its script as 1.6.1 does "
                          f"(one {MAIN_SCRIPT_TAG!r}…)")
    [bundle_name] = found
    bundle = (SOURCE / "static" / "js" / bundle_name).read_text(encoding="utf-8")
    for old, new in BUNDLE_PATCHES:
        if bundle.count(old) != 1:
            raise _unexpected(f"its script ({SOURCE / 'static' / 'js' / bundle_name}) holds {bundle.count(old)} "
                              f"times, not once, the code the portal patches ({old[:60]!r}…)")
        bundle = bundle.replace(old, new)
    digest = hashlib.sha256((index + CLICK_SCRIPT + bundle).encode("utf-8")).hexdigest()[:12]
    served_name = bundle_name.replace(".js", f".ft{digest}.js")
    page = index.replace(MAIN_SCRIPT_TAG, CLICK_SCRIPT + MAIN_SCRIPT_TAG).replace(bundle_name, served_name)
    target = root / f"streamlit-flow-{COMPONENT_VERSION}-{digest}"
    if (target / "index.html").is_file():
        return target
    try:
        root.mkdir(parents=True, exist_ok=True)
        scratch = root / f".{target.name}.{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(SOURCE, scratch)
        (scratch / "static" / "js" / served_name).write_text(bundle, encoding="utf-8")
        (scratch / "index.html").write_text(page, encoding="utf-8")
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "index.html").is_file():  # not another portal's copy made meanwhile: a real failure
                raise
            shutil.rmtree(scratch)
    except OSError as err:
        raise FlowTrainError(f"Could not prepare the canvas component in {root}: {err}. Give the portal's user a "
                             "writable cache folder (XDG_CACHE_HOME) and restart it.") from err
    return target


def _unexpected(what: str) -> FlowTrainError:
    return FlowTrainError(
        f"The canvas component is not the one the portal was written for: {what}; installed: "
        f"streamlit-flow-component {COMPONENT_VERSION}. Install the version requirements.txt pins: "
        "pip install -r requirements.txt")


@functools.cache
def component() -> Callable[..., Any]:
    """The declared component (once per process)."""
    return components.declare_component(NAME, path=str(served_build(cache_root())))
