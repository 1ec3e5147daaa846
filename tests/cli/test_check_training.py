"""``python -m flowtrain check-training``: the three generated programs train in lockstep (issue 22).

The same canonical start weights, the same batches in the same order, no augmentation or dropout:
the first step's loss is the same number in every framework, and over the first steps the losses
stay within 1e-4 and the weights within 1e-3 (relative) of torch's. Longer runs drift apart as
float32 rounding differences grow (docs/generated-program.md, "Lockstep training").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]
STEPS = 5


@pytest.mark.parametrize("template", ["mlp", "mnist_cnn"])
def test_the_three_programs_train_in_lockstep(template: str, tmp_path: Path) -> None:
    spec = tmp_path / f"{template}.json"
    spec.write_text(zoo.template(template).model_dump_json(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "flowtrain", "check-training", str(spec), "--steps", str(STEPS),
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    report = json.loads(proc.stdout)
    runs = report["frameworks"]
    assert {fw: r["status"] for fw, r in runs.items()} == {"torch": "ok", "keras": "ok", "paddle": "ok"}, runs
    assert "augmentation and dropout are switched off" in report["note"]
    for framework, run in runs.items():
        assert sorted(int(step) for step in run["losses"]) == list(range(1, STEPS + 1)), framework
    first = {fw: r["losses"]["1"] for fw, r in runs.items()}
    assert max(first.values()) - min(first.values()) <= 1e-6 * first["torch"], f"not the same start: {first}"
    for framework in ("keras", "paddle"):
        assert runs[framework]["loss_diff"] <= 1e-4, (framework, runs[framework])
        assert runs[framework]["weight_diff"] <= 1e-3, (framework, runs[framework])
    assert report["ok"] and proc.returncode == 0, proc.stderr[-3000:]
