"""``python -m flowtrain check-training``: the three generated programs train in lockstep (issue 22).

The same canonical start weights, the same batches in the same order, no augmentation or dropout:
the first step's loss is the same number in every framework, and the losses stay within 1e-4 and
the weights within 1e-3 (relative) of torch's. The mlp holds that over the issue's 50 steps (it
did not before paddle's Adam took torch's bias corrections: 1.6e-2 and 9.7e-3 then). mnist_cnn is
checked over 10: over 50 its run is chaotic in float32 itself — torch started from weights one
float32 ulp away ends 3.6e-2 (loss) and 2.9e-2 (weights) from torch (``--floor``), so no second
program can hold 1e-3 there (docs/generated-program.md, "Lockstep training").
Each case costs about a minute, nearly all of it the three programs' start-up.
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
# the 50 steps for the mlp; mnist_cnn over 10, as before (over 50 its own float32 floor is beyond the targets)
STEPS = {"mlp": 50, "mnist_cnn": 10}


@pytest.mark.parametrize("template", ["mlp", "mnist_cnn"])
def test_the_three_programs_train_in_lockstep(template: str, tmp_path: Path) -> None:
    steps = STEPS[template]
    spec = tmp_path / f"{template}.json"
    spec.write_text(zoo.template(template).model_dump_json(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "flowtrain", "check-training", str(spec), "--steps", str(steps),
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    report = json.loads(proc.stdout)
    runs = report["frameworks"]
    assert {fw: r["status"] for fw, r in runs.items()} == {"torch": "ok", "keras": "ok", "paddle": "ok"}, runs
    assert "augmentation and dropout are switched off" in report["note"]
    for framework, run in runs.items():
        assert sorted(int(step) for step in run["losses"]) == list(range(1, steps + 1)), framework
    first = {fw: r["losses"]["1"] for fw, r in runs.items()}
    assert max(first.values()) - min(first.values()) <= 1e-6 * first["torch"], f"not the same start: {first}"
    for framework in ("keras", "paddle"):
        assert runs[framework]["loss_diff"] <= 1e-4, (framework, runs[framework])
        assert runs[framework]["weight_diff"] <= 1e-3, (framework, runs[framework])
    assert report["ok"] and proc.returncode == 0, proc.stderr[-3000:]
