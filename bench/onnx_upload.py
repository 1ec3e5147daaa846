"""A large ONNX model through the editor's Import ONNX in chromium: upload time, import time, and the
portal's peak memory before and after (docs/onnx.md, "Large models: the upload goes to disk in pieces").

    .venv/bin/python bench/onnx_upload.py --mb 512

Starts the portal (``streamlit run serve.py``, its own FLOWTRAIN_HOME and data root in a temporary
folder) and Debian's chromium through Playwright, writes a real model of about ``--mb`` MB (x (1, 1024)
→ Gemm → Relu → Gemm (3): nearly all of it one initializer), uploads it and waits for the import's notice.
The portal's peak resident memory (``VmHWM``) barely moves: the file goes to disk in pieces and its
weights are copied, never loaded, by the portal.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def write_model(path: Path, mb: int) -> int:
    rows = max(1, mb * 2**20 // (1024 * 4))
    inits = [numpy_helper.from_array(np.full((rows, 1024), 0.001, np.float32), "w1"),
             numpy_helper.from_array(np.full((3, rows), 0.001, np.float32), "w2")]
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h1"], name="wide", transB=1),
             helper.make_node("Relu", ["h1"], ["r1"], name="act"),
             helper.make_node("Gemm", ["r1", "w2"], ["y"], name="head", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path.stat().st_size


def peak_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def start_portal(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "data").mkdir()
    config = root / "flowtrain.toml"
    config.write_text(f'home = "{root / "home"}"\n[data]\nroots = ["{root / "data"}"]\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_CONFIG=str(config), FLOWTRAIN_HOME=str(root / "home"))
    log = (root / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)  # a benchmark's own polling of a server it started, not a test
    raise SystemExit(f"the portal did not start: {(root / 'server.log').read_text()[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=512, help="the model's size in MB (default 512)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="flowtrain-bench-upload-") as tmp:
        root = Path(tmp)
        size = write_model(root / "wide.onnx", args.mb)
        proc, url = start_portal(root)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1600, "height": 1300})
                page.goto(url)
                uploader = page.locator('.ft-onnx-upload input[type="file"]')
                uploader.wait_for(state="attached", timeout=180_000)
                before = peak_mb(proc.pid)
                start = time.perf_counter()
                uploader.set_input_files(root / "wide.onnx")
                page.get_by_text(re.compile(r"^Uploaded wide\.onnx .* in [\d.]+ s")).first.wait_for(timeout=1_800_000)
                uploaded = time.perf_counter() - start
                during = peak_mb(proc.pid)
                notice = page.get_by_text(re.compile(r"^(Imported|Could not import) wide\.onnx")).first
                notice.wait_for(timeout=1_800_000)
                imported = time.perf_counter() - start
                text = notice.inner_text()
                browser.close()
            after = peak_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"| model | uploaded | imported | portal peak memory before / after upload / after import |\n"
          f"|---|---|---|---|\n| {size / 2**20:,.1f} MB | {uploaded:.1f} s | {imported:.1f} s | "
          f"{before:,.0f} / {during:,.0f} / {after:,.0f} MB |\n\n{text}")
    return 0 if text.startswith("Imported") else 1


if __name__ == "__main__":
    raise SystemExit(main())
