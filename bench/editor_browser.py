"""Edit latency as a user feels it: from the action in chromium to the page settled with the new canvas drawn.

    .venv/bin/python bench/editor_browser.py [--sizes 10 100 500] [--repeat 5] [--before REV]

Starts the portal (``streamlit run app.py``, its own FLOWTRAIN_HOME) and Debian's chromium through
Playwright (as tests/browser does), imports a ``--sizes``-node graph (Input → groups of Linear, ReLU,
Linear and a residual Add … → Output on the built-in iris data) through the editor's *Import a spec*
and times, per size and case, ``--repeat`` times:

- *palette add*: a click on the palette's ReLU, until the canvas holds the new node;
- *param change*: a new ``out_features`` typed into the side form of a selected Linear (Enter), until
  the node on the canvas shows it;
- *drag*: a node dragged 40 px with the mouse, until the page is settled again after the drag was sent;
- *connect*: an edge drawn with the mouse into a residual Add, until the canvas holds it.

*Settled* is tests/browser/ui.py's (connected, the script not running, nothing stale) with exactly one
canvas iframe whose nodes and edges are drawn as expected, and it must hold for ``QUIET_S`` without
another script run starting or a message going to or coming from the server (the component's answer
to a Python-side update causes a run; a run of the canvas' fragment alone can be too short to show in
the page's script state): the time is the moment it last became true. Also shown: *drawn*, when the canvas first showed the result (the
page may still have been running), and the script runs the action caused (whole page or the canvas'
fragment) with the seconds the page spent running them. Prints one row per size and case (median,
p90, n) and the machine's load average before and after, then where the time went (the WebSocket's
side: the action's message out, the server's end of the last script run it caused, the KB both ways).

``--before REV`` also starts the portal of the code at git revision REV (``git archive`` into a
temporary folder) and times both, size by size in turn, so that both see the same load on a shared
machine; the table then puts the medians side by side (docs/performance.md has one).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CANVAS = 'iframe[title="portal.flow_component.streamlit_flow"]'
QUIET_S = 0.6
TIMEOUT_S = float(os.environ.get("EDITOR_BROWSER_TIMEOUT_S", "120"))
TARGETS_S = {100: 0.3, 500: 1.0}

RUN_COUNTER = """(() => {
  window.__ftRunsEnded = 0;
  window.__ftRunLog = [];  // [performance.now(), 1 (a script run started) | 0 (it ended)]
  const watch = () => new MutationObserver(records => {
    for (const r of records) {
      const now = r.target.getAttribute('data-test-script-state');
      if (r.oldValue === 'running' && now !== 'running') { window.__ftRunsEnded += 1; window.__ftRunLog.push([performance.now(), 0]); }
      else if (r.oldValue !== 'running' && now === 'running') window.__ftRunLog.push([performance.now(), 1]);
    }
  }).observe(document.documentElement, {subtree: true, attributes: true, attributeOldValue: true,
                                         attributeFilter: ['data-test-script-state']});
  if (document.documentElement) watch(); else document.addEventListener('DOMContentLoaded', watch);
  // every message to and from the server: a script run too short to show in the DOM still sends some.
  // __ftWsLog: [performance.now(), 1 (sent) | 0 (received), bytes, how a script run ended (ForwardMsg field 6,
  // script_finished: 0 the whole page, 3 a fragment alone) or -1]
  window.__ftWs = {sent: 0, received: 0};
  window.__ftWsLog = [];
  const size = d => d instanceof ArrayBuffer ? d.byteLength : (d && d.byteLength !== undefined ? d.byteLength
    : (d && d.size !== undefined ? d.size : String(d).length));
  const finished = d => {
    if (!(d instanceof ArrayBuffer)) return -1;
    const buf = new Uint8Array(d); let i = 0;
    const varint = () => { let x = 0, s = 0, b; do { b = buf[i++]; x += (b & 0x7f) * 2 ** s; s += 7; } while (b & 0x80 && i < buf.length); return x; };
    while (i < buf.length) {
      const key = varint(), wire = key & 7;
      if (wire === 0) { const v = varint(); if (key >> 3 === 6) return v; }
      else if (wire === 1) i += 8; else if (wire === 2) { const n = varint(); i += n; } else if (wire === 5) i += 4; else break;
    }
    return -1;
  };
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', e => {
        window.__ftWs.received += 1; window.__ftWsLog.push([performance.now(), 0, size(e.data), finished(e.data)]);
      });
    }
    send(data) {
      window.__ftWs.sent += 1; window.__ftWsLog.push([performance.now(), 1, size(data), -1]);
      return super.send(data);
    }
  };
})();"""

# The page as the waits see it: settled (tests/browser/ui.py), and the one canvas' nodes, edges and texts.
STATE = """(sel) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const settled = !!app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
    && app.getAttribute('data-test-script-state') === 'notRunning' && !document.querySelector('[data-stale="true"]');
  const frames = document.querySelectorAll(sel);
  let nodes = -1, edges = -1, texts = {};
  if (frames.length === 1 && frames[0].contentDocument) {
    const doc = frames[0].contentDocument;
    const drawn = [...doc.querySelectorAll('.react-flow__node')].filter(n => n.getBoundingClientRect().width > 0);
    nodes = drawn.length;
    edges = doc.querySelectorAll('.react-flow__edge').length;
    for (const n of drawn) texts[n.getAttribute('data-id')] = n.innerText;
  }
  return {settled, runs: window.__ftRunsEnded, sent: window.__ftWs.sent, received: window.__ftWs.received,
          nodes, edges, texts};
}"""


def graph_spec(n_nodes: int) -> dict[str, Any]:
    """Input → (Linear → ReLU → Linear → Add(first Linear, second)) … → Linear(3) → Output: ``n_nodes`` nodes."""
    nodes: list[dict[str, Any]] = [{"id": "input", "op": "Input"}]
    edges: list[dict[str, Any]] = []
    last = "input"
    k = 0
    while len(nodes) + 4 + 2 <= n_nodes:
        a, r, b, s = f"lin{k}a", f"relu{k}", f"lin{k}b", f"add{k}"
        nodes += [{"id": a, "op": "Linear", "params": {"out_features": 32}}, {"id": r, "op": "ReLU"},
                  {"id": b, "op": "Linear", "params": {"out_features": 32}}, {"id": s, "op": "Add"}]
        edges += [{"source": last, "target": a}, {"source": a, "target": r}, {"source": r, "target": b},
                  {"source": a, "target": s, "port": 0}, {"source": b, "target": s, "port": 1}]
        last, k = s, k + 1
    while len(nodes) + 2 < n_nodes:
        nodes.append({"id": f"act{len(nodes)}", "op": "ReLU"})
        edges.append({"source": last, "target": nodes[-1]["id"]})
        last = nodes[-1]["id"]
    nodes += [{"id": "head", "op": "Linear", "params": {"out_features": 3}}, {"id": "output", "op": "Output"}]
    edges += [{"source": last, "target": "head"}, {"source": "head", "target": "output"}]
    return {"schema_version": 2, "name": f"bench{n_nodes}", "data": {"source": "sklearn:iris"},
            "model": {"nodes": nodes, "edges": edges}}


def start_portal(home: Path, tree: Path = REPO) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env["FLOWTRAIN_HOME"] = str(home)
    log = (home / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)  # a benchmark's own polling of a server it started, not a test
    raise SystemExit(f"the portal did not start: {(home / 'server.log').read_text()[-2000:]}")


@dataclass(frozen=True)
class Timing:
    """One action: seconds to the page settled (the figure the targets are about), to the result first
    drawn on the canvas (the page may still be running or stale then), and the script runs it caused
    (full page or fragment) with the seconds the page spent running them."""

    settled: float
    drawn: float
    runs: int
    running: float
    wire: Wire


@dataclass(frozen=True)
class Wire:
    """The WebSocket's side of an action, from the action to the page settled: seconds to the first message to the
    server and to the last script run's end as the server said it (its ``script_finished`` message), the KB sent
    and received, and how the runs ended (``page``: the whole page, ``fragment``: a fragment alone)."""

    first_out: float
    finished: float
    out_kb: float
    in_kb: float
    ends: str


class Clock:
    """An action's start, on this side (``perf_counter``) and in the page (``performance.now()``, ms)."""

    def __init__(self, page: Any) -> None:
        self.page_ms = page.evaluate("() => performance.now()")
        self.t0 = time.perf_counter()

    def wire(self, page: Any, until_s: float) -> Wire:
        """The WebSocket's messages from the start until ``until_s`` (:class:`Wire`)."""
        first_out, finished, out_b, in_b, ends = None, 0.0, 0, 0, []
        for at, sent, size, status in page.evaluate("() => window.__ftWsLog"):
            if at < self.page_ms or at > self.page_ms + until_s * 1000 + 1:
                continue
            t = (at - self.page_ms) / 1000
            if sent:
                out_b += size
                first_out = t if first_out is None else first_out
            else:
                in_b += size
            if status >= 0:
                finished = t
                ends.append({0: "page", 3: "fragment", 2: "early"}.get(status, str(status)))
        return Wire(first_out if first_out is not None else -1.0, finished, out_b / 1024, in_b / 1024,
                    "+".join(ends) or "none")

    def runs(self, page: Any, until_s: float) -> tuple[int, float]:
        """Script runs started after the start and ended by ``until_s``; the seconds they ran."""
        count, running, started = 0, 0.0, None
        for at, starts in page.evaluate("() => window.__ftRunLog"):
            if at < self.page_ms or at > self.page_ms + until_s * 1000 + 1:
                continue
            if starts:
                started = at
            elif started is not None:
                count, running, started = count + 1, running + (at - started) / 1000, None
        return count, running


def settle(page: Any, clock: Clock, done: Callable[[dict[str, Any]], bool], what: str = "") -> Timing:
    """From the action until ``done(state)`` and settled became true for the last time before a quiet spell."""
    since: float | None = None
    drawn: float | None = None
    seen: tuple[int, int, int] | None = None  # script runs ended, messages sent and received
    t0 = clock.t0
    deadline = t0 + TIMEOUT_S
    while time.perf_counter() < deadline:
        state = page.evaluate(STATE, CANVAS)
        now = time.perf_counter()
        if drawn is None and done(state):
            drawn = now - t0
        ok = state["settled"] and done(state)
        activity = (state["runs"], state["sent"], state["received"])
        if not ok:
            since = None
        elif since is None or activity != seen:  # (became true without a script run ending: a scroll)
            since = now
        elif now - since >= QUIET_S:
            count, running = clock.runs(page, since - t0)
            return Timing(since - t0, drawn if drawn is not None else since - t0, count, running,
                          clock.wire(page, since - t0))
        seen = activity
    picture = Path(tempfile.gettempdir()) / "editor-browser-timeout.png"
    page.screenshot(path=str(picture), full_page=True)
    raise Unsettled(f"the page did not settle in {TIMEOUT_S:.0f} s after {what or 'an action'}: nodes "
                    f"{state['nodes']}, edges {state['edges']}, settled {state['settled']}; screenshot: {picture}")


class Unsettled(Exception):
    """An action after which the page did not settle: that case is left out (and said so), the others go on."""


def wait(page: Any, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    settle(page, Clock(page), done)
    return page.evaluate(STATE, CANVAS)


def visible_nodes(page: Any) -> list[dict[str, Any]]:
    """The canvas' nodes inside its pane, with their ids, texts and handle centres (page coordinates)."""
    return page.evaluate("""(sel) => {
      const frame = document.querySelector(sel);
      const off = frame.getBoundingClientRect();
      const doc = frame.contentDocument;
      const pane = doc.querySelector('.react-flow').getBoundingClientRect();
      const out = [];
      for (const n of doc.querySelectorAll('.react-flow__node')) {
        const r = n.getBoundingClientRect();
        if (r.top < pane.top + 20 || r.bottom > pane.bottom - 20 || r.left < pane.left + 20 || r.right > pane.right - 20
            || off.top + r.top < 0 || off.top + r.bottom > window.innerHeight)
          continue;
        const c = el => { const b = el.getBoundingClientRect();
          return [off.left + b.left + b.width / 2, off.top + b.top + b.height / 2]; };
        const src = n.querySelector('.react-flow__handle.source'), tgt = n.querySelector('.react-flow__handle.target');
        out.push({id: n.getAttribute('data-id'), text: n.innerText, centre: c(n), width: r.width,
                  source: src ? c(src) : null, target: tgt ? c(tgt) : null});
      }
      return out;
    }""", CANVAS)


def zoom_in_on(page: Any, node_id: str, width_px: float = 110) -> None:
    """Zoom with the mouse wheel around ``node_id`` until it is ``width_px`` wide (untimed preparation)."""
    show_canvas(page)  # the whole canvas in the window
    for _ in range(60):
        seen = {n["id"]: n for n in visible_nodes(page)}
        node = seen.get(node_id)
        if node is None:
            raise SystemExit(f"node {node_id} is not in view")
        if node["width"] >= width_px:
            return
        page.mouse.move(*node["centre"])
        page.mouse.wheel(0, -300)
        wait(page, lambda s: True)
    raise SystemExit(f"could not zoom in on {node_id}")


def show_canvas(page: Any) -> None:
    """Scroll the canvas to the middle of the window (the newest iframe: a remount may be under way)."""
    page.evaluate("sel => { const f = document.querySelectorAll(sel); "
                  "if (f.length) f[f.length - 1].scrollIntoView({block: 'center'}); }", CANVAS)


def load(page: Any, url: str, n_nodes: int) -> None:
    page.goto(url)
    wait(page, lambda s: s["nodes"] >= 0)
    # the user looks at the canvas (chromium does not draw an iframe out of view)
    show_canvas(page)
    wait(page, lambda s: s["nodes"] >= 1)
    spec = graph_spec(n_nodes)
    uploader = (page.locator('[data-testid="stFileUploader"]').filter(has_text="Import a spec (JSON)")
                .locator('input[type="file"]'))
    uploader.set_input_files(files=[{"name": f"bench{n_nodes}.json", "mimeType": "application/json",
                                     "buffer": json.dumps(spec).encode()}])
    wait(page, lambda s: s["nodes"] >= 0)
    show_canvas(page)
    wait(page, lambda s: s["nodes"] == n_nodes)


def case_palette(page: Any) -> Timing:
    before = page.evaluate(STATE, CANVAS)["nodes"]
    button = page.get_by_role("button", name="ReLU", exact=True)
    clock = Clock(page)
    button.click()
    return settle(page, clock, lambda s: s["nodes"] == before + 1, "a palette add")


def _select(page: Any, node_id: str) -> None:
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Selected node", exact=True))
    box.click()
    page.keyboard.type(node_id)
    page.get_by_role("option", name=node_id, exact=True).first.click()
    wait(page, lambda s: True)


def case_param(page: Any, node_id: str, value: int) -> Timing:
    field = page.get_by_label("out_features", exact=True)
    field.fill(str(value))
    clock = Clock(page)
    field.press("Enter")
    return settle(page, clock, lambda s: f"out_features={value}" in s["texts"].get(node_id, ""), "a parameter change")


def case_drag(page: Any, node_id: str, dy: float) -> Timing:
    node = {n["id"]: n for n in visible_nodes(page)}[node_id]
    sent = page.evaluate(STATE, CANVAS)["sent"]
    x, y = node["centre"]
    y += node["width"] * 0.1  # on its text, off its handles
    page.mouse.move(x, y)
    page.mouse.down()
    clock = Clock(page)
    page.mouse.move(x + 10, y + dy, steps=8)
    page.mouse.up()
    return settle(page, clock, lambda s: s["sent"] > sent, "a drag")


def case_connect(page: Any, source: str, target: str) -> Timing:
    seen = {n["id"]: n for n in visible_nodes(page)}
    src, tgt = seen[source]["source"], seen[target]["target"]
    edges = page.evaluate(STATE, CANVAS)["edges"]
    page.mouse.move(*src)
    page.mouse.down()
    clock = Clock(page)
    page.mouse.move(*tgt, steps=12)
    page.mouse.up()
    return settle(page, clock, lambda s: s["edges"] == edges + 1, "a connection")


def measure(browser: Any, url: str, n_nodes: int, repeat: int) -> dict[str, list[Timing]]:
    context = browser.new_context(viewport={"width": 1600, "height": 1300})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    times: dict[str, list[Timing]] = {"palette add": [], "param change": [], "drag": [], "connect": []}
    try:
        load(page, url, n_nodes)
        for _ in range(repeat):
            times["palette add"].append(case_palette(page))
        adds = [i for i in page.evaluate(STATE, CANVAS)["texts"] if i.startswith("add")]
        target = adds[len(adds) // 2] if adds else "head"
        linear = f"lin{target[3:]}b" if adds else "head"
        _select(page, linear)
        for k in range(repeat):
            times["param change"].append(case_param(page, linear, 40 + k))
        zoom_in_on(page, target)
        for k in range(repeat):
            times["drag"].append(case_drag(page, target, 40 if k % 2 == 0 else -40))
        sources = [f"lin{target[3:]}a"] if adds else []
        k = int(target[3:]) if adds else 0
        order = [f"relu{k}", f"lin{k - 1}b", f"relu{k - 1}", f"lin{k - 1}a", f"add{k - 1}", f"lin{k - 2}b",
                 f"relu{k - 2}"] if adds else []
        for source in order:
            if len(times["connect"]) >= repeat:
                break
            seen = {n["id"] for n in visible_nodes(page)}
            if source in seen and target in seen and source not in sources:
                times["connect"].append(case_connect(page, source, target))
                sources.append(source)
    except Unsettled as err:  # the cases not yet timed are left out of the table
        print(f"  {n_nodes} nodes: {err}; the cases after it are left out", file=sys.stderr)
    context.close()
    return times


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def checkout(rev: str) -> Path:
    """The repository at ``rev`` (``git archive``) in a temporary folder, to run the code before a change."""
    folder = Path(tempfile.mkdtemp(prefix=f"flowtrain-browser-bench-{rev[:12]}-"))
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def row(n: int, case: str, values: list[Timing]) -> dict[str, Any]:
    settled = [v.settled for v in values]
    return {"nodes": n, "action": case, "median": statistics.median(settled), "p90": p90(settled),
            "drawn": statistics.median(v.drawn for v in values), "runs": statistics.median(v.runs for v in values),
            "running": statistics.median(v.running for v in values), "n": len(values),
            "out_at": statistics.median(v.wire.first_out for v in values),
            "finished": statistics.median(v.wire.finished for v in values),
            "out_kb": statistics.median(v.wire.out_kb for v in values),
            "in_kb": statistics.median(v.wire.in_kb for v in values),
            "ends": statistics.mode(v.wire.ends for v in values)}


def wire_table(name: str, rows: list[dict[str, Any]]) -> None:
    """Where the time went (medians): to the click's message leaving the page, to the server's end of the last
    script run, to the page settled (the rest: the page drawing what the runs sent), and the bytes both ways."""
    print(f"\nWhere the time went ({name}): seconds from the action (medians)")
    print("| nodes | action | message out | last run ended | settled | drawing after the run | KB out | KB in "
          "| runs ended as |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['nodes']} | {r['action']} | {r['out_at']:.3f} | {r['finished']:.3f} | {r['median']:.3f} | "
              f"{r['median'] - r['finished']:.3f} | {r['out_kb']:.1f} | {r['in_kb']:.1f} | {r['ends']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", metavar="REV", help="also time the code at this git revision, size by size "
                        "in turn with the working tree's (the same load for both)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    trees = {"after" if args.before else "": REPO}
    if args.before:
        trees = {"before": checkout(args.before), **trees}
    load_before = os.getloadavg()
    portals = {name: start_portal(Path(tempfile.mkdtemp(prefix="flowtrain-browser-bench-")), tree)
               for name, tree in trees.items()}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for n in args.sizes:
                for name, (_proc, url) in portals.items():
                    for case, values in measure(browser, url, n, args.repeat).items():
                        if values:
                            rows[name].append(row(n, case, values))
                            print(f"  {name or 'this tree'}: {n} nodes, {case}: "
                                  + ", ".join(f"{v.settled:.2f} (drawn {v.drawn:.2f}, {v.runs} runs "
                                              f"{v.running:.2f} s; out at {v.wire.first_out:.3f}, run ended "
                                              f"{v.wire.finished:.3f} [{v.wire.ends}], {v.wire.out_kb:.1f} KB out, "
                                              f"{v.wire.in_kb:.1f} KB in)" for v in values), file=sys.stderr)
            browser.close()
    finally:
        for proc, _url in portals.values():
            proc.terminate()
            proc.wait(timeout=20)
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.1f} / {load_before[1]:.1f} / {load_before[2]:.1f}, after "
          f"{load_after[0]:.1f} / {load_after[1]:.1f} / {load_after[2]:.1f} on {os.cpu_count()} CPUs")
    print("Seconds from the action to the page settled with the result drawn (median, p90); drawn: the result "
          "first on the canvas; runs: script runs it caused (median), and how long they ran.")
    if args.before:
        print(f"| nodes | action | before ({args.before}) median | after median | after p90 | after drawn "
              "| runs before → after | n | target |")
        print("|---:|---|---:|---:|---:|---:|---|---:|---|")
        old = {(r["nodes"], r["action"]): r for r in rows["before"]}
        for r in rows["after"]:
            b = old.get((r["nodes"], r["action"]))
            was, runs = (f"{b['median']:.2f}", f"{b['runs']:g}") if b else ("—", "—")
            print(f"| {r['nodes']} | {r['action']} | {was} | {r['median']:.2f} | {r['p90']:.2f} | {r['drawn']:.2f} | "
                  f"{runs} → {r['runs']:g} | {r['n']} | {verdict(r)} |")
        wire_table(f"before, {args.before}", rows["before"])
        wire_table("after", rows["after"])
        return 0
    print("| nodes | action | median s | p90 s | drawn s | runs (running s) | n | target |")
    print("|---:|---|---:|---:|---:|---|---:|---|")
    for r in rows[""]:
        print(f"| {r['nodes']} | {r['action']} | {r['median']:.2f} | {r['p90']:.2f} | {r['drawn']:.2f} | "
              f"{r['runs']:g} ({r['running']:.2f}) | {r['n']} | {verdict(r)} |")
    wire_table("this tree", rows[""])
    return 0


def verdict(r: dict[str, Any]) -> str:
    target = TARGETS_S.get(r["nodes"])
    return "" if target is None else f"< {target} s: {'yes' if r['median'] < target else 'NO'}"


if __name__ == "__main__":
    raise SystemExit(main())
