"""The small checks of generated code that share one subprocess per framework (importing tensorflow or
paddle costs more than the checks): each module in CHECKS has ``script(framework) -> str``, a program that
prints its findings as one JSON line; ``results(framework)`` runs them all in one subprocess, once per
session, each in its own namespace, and gives each module's findings or the traceback it ended with."""

from __future__ import annotations

import functools
import importlib
import json
import subprocess
import sys
from typing import Any

CHECKS = ("tests.frameworks.test_segment_augment", "tests.frameworks.test_segmentation_loss")

RUNNER = """
import contextlib, io, json, traceback
results = {}
for name, source in CHECKS.items():
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(source, name, "exec"), {"__name__": name})
        results[name] = {"findings": json.loads(buf.getvalue().strip().splitlines()[-1])}
    except Exception:
        results[name] = {"error": traceback.format_exc()[-3000:]}
print(json.dumps(results))
"""


@functools.cache
def results(framework: str) -> dict[str, dict[str, Any]]:
    scripts = {name: importlib.import_module(name).script(framework) for name in CHECKS}
    done = subprocess.run([sys.executable, "-c", f"CHECKS = {scripts!r}\n" + RUNNER], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def findings(module: str, framework: str) -> dict[str, Any]:
    """The findings of one module's check in ``framework``; a check that raised fails with its traceback."""
    got = results(framework)[module]
    assert "error" not in got, got["error"]
    return got["findings"]
