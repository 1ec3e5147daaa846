"""How fast, and in how much memory, hostile ONNX uploads are refused (docs/onnx.md, "What an import may
reach and spend").

    .venv/bin/python bench/onnx_import_limits.py

Each case is imported as an upload (bytes) in a fresh subprocess; the table gives the file's size, the
import's wall time and the subprocess's peak resident memory (ru_maxrss, interpreter and onnx included:
the ``small model`` row is that baseline), and the first problem's location and message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, resource, sys, time
from core.onnx_import import import_onnx
raw = open(sys.argv[1], 'rb').read()
start = time.perf_counter()
try:
    import_onnx(raw)
    what = 'imported'
except Exception as exc:
    problems = getattr(exc, 'problems', None)
    what = f'{problems[0].location}: {problems[0].message}' if problems else f'{type(exc).__name__}: {exc}'
print(json.dumps({'s': time.perf_counter() - start, 'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  'what': what[:90]}))
"""


def _model(nodes: list, inits: dict[str, np.ndarray]) -> ModelProto:
    last = nodes[-1].output[0]
    graph = helper.make_graph([*nodes, helper.make_node("Add", ["x", last], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def cases() -> dict[str, bytes]:
    small = _model([helper.make_node("Identity", ["w"], ["c"])], {"w": np.ones(4, np.float32)}).SerializeToString()
    bomb = _model([helper.make_node("ConstantOfShape", ["s"], ["c"], name="bomb")],
                  {"s": np.array([1, 2**31], np.int64)}).SerializeToString()
    body = helper.make_graph(
        [helper.make_node("Identity", ["ci"], ["co"]), helper.make_node("Add", ["a", "a"], ["a2"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("ci", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("co", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a2", TensorProto.FLOAT, [4])])
    loop = _model([helper.make_node("Loop", ["n", "t", "v"], ["c"], name="loop", body=body)],
                  {"n": np.array(10**15, np.int64), "t": np.array(True), "v": np.ones(4, np.float32)})
    node = helper.make_node("Relu", ["x"], ["y"]).SerializeToString()
    nodes = (b"\x0a" + _varint(len(node)) + node) * 10**6
    million = small + b"\x3a" + _varint(len(nodes)) + nodes
    return {"small model": small, "ConstantOfShape (1, 2^31)": bomb, "Loop, 10^15 trips": loop.SerializeToString(),
            "10^6 Relu nodes": million}


def main() -> None:
    print(f"{'case':28} {'bytes':>10} {'seconds':>8} {'peak MB':>8}  result")
    with tempfile.TemporaryDirectory() as tmp:
        for name, raw in cases().items():
            path = Path(tmp) / "m.onnx"
            path.write_bytes(raw)
            proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, capture_output=True,
                                  text=True, timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
            if proc.returncode:
                print(f"{name:28} {len(raw):>10,} failed: {proc.stderr.strip().splitlines()[-1]}")
                continue
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{name:28} {len(raw):>10,} {got['s']:>8.3f} {got['rss'] / 1024:>8.0f}  {got['what']}")


if __name__ == "__main__":
    main()
