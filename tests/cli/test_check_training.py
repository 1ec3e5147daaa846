"""``python -m flowtrain check-training``: the three generated programs train in lockstep (issue 22).

The same canonical start weights, the same batches in the same order, no augmentation or dropout:
the first step's loss is the same number in every framework, and the losses stay within 1e-4 and
the weights within 1e-3 (relative) of torch's, or within twice how far torch parts from itself from
starts one float32 ulp away (--floor, the largest over its samples), both over the issue's 50 steps.
mnist_cnn amplifies float32 rounding (ReLU and max-pool kinks crossed differently from step 20 on),
so its bound is its floor's (docs/generated-program.md, "Lockstep training").
The mlp's case (6 programs) costs about a minute on two idle cores, mnist_cnn's (15 programs) a few; both
took 621 s at a load average of 7 to 11. On two cores shared at a load average of about 25, mnist_cnn's
took 1523 s over 30 steps with one floor run, and the two-rank case 489 s.
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
STEPS = 50  # the issue's
# torch's runs from starts one ulp away: check-training's default 3 for the mlp (its programs end 2e-6 from torch's);
# 12 for mnist_cnn, whose runs cross a kink at steps 43-46 about one time in four (torch against torch: 3 of 12
# starts), Keras's one in three (5 of 13): with 3 samples none crosses in 0.75³ = 42 % of machines and a program
# that did would fail; 12 leave about 2 % (docs/generated-program.md, "Lockstep training").
FLOOR_SAMPLES = {"mlp": 3, "mnist_cnn": 12}


@pytest.mark.parametrize("template", ["mlp", "mnist_cnn"])
def test_the_three_programs_train_in_lockstep(template: str, tmp_path: Path) -> None:
    spec = tmp_path / f"{template}.json"
    spec.write_text(zoo.template(template).model_dump_json(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "flowtrain", "check-training", str(spec), "--steps", str(STEPS),
                           "--floor", "--floor-samples", str(FLOOR_SAMPLES[template]), "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=3600)
    report = json.loads(proc.stdout)
    runs = report["frameworks"]
    print(json.dumps({"differences": {fw: [r["loss_diff"], r["weight_diff"]] for fw, r in runs.items()},
                      "floor": [[s["loss_diff"], s["weight_diff"]] for s in report["floor_samples"]],
                      "tolerances": report["tolerances"]}))  # shown with pytest -rP: what the bound was drawn from
    # The bound is the (1e-4 loss, 1e-3 weights) or twice torch's largest spread over its starts one
    # float32 ulp away, whichever is larger: on an AMD EPYC one rounding flips a ReLU at the mlp's step 27 and
    # torch parts from itself by 1.8e-3, exactly as far as keras and paddle part from torch; whether a run
    # crosses such a kink is chaotic, so one sample is luck and the bound takes the largest (core/lockstep.py).
    floor, samples = report["floor"], report["floor_samples"]
    assert floor["status"] == "ok" and floor["samples"] == FLOOR_SAMPLES[template], floor
    assert [s["status"] for s in samples] == ["ok"] * FLOOR_SAMPLES[template], samples
    assert floor["loss_diff"] == max(s["loss_diff"] for s in samples), samples
    assert floor["weight_diff"] == max(s["weight_diff"] for s in samples), samples
    loss_bound = max(1e-4, 2 * floor["loss_diff"])
    weight_bound = max(1e-3, 2 * floor["weight_diff"])
    assert report["tolerances"] == {"loss": loss_bound, "weight": weight_bound}, report["tolerances"]
    assert {fw: r["status"] for fw, r in runs.items()} == {"torch": "ok", "keras": "ok", "paddle": "ok"}, runs
    assert "augmentation and dropout are switched off" in report["note"]
    for framework, run in runs.items():
        assert sorted(int(step) for step in run["losses"]) == list(range(1, STEPS + 1)), framework
    first = {fw: r["losses"]["1"] for fw, r in runs.items()}
    assert max(first.values()) - min(first.values()) <= 1e-6 * first["torch"], f"not the same start: {first}"
    for framework in ("keras", "paddle"):
        assert runs[framework]["loss_diff"] <= loss_bound, (framework, runs[framework], floor)
        assert runs[framework]["weight_diff"] <= weight_bound, (framework, runs[framework], floor)
    assert report["ok"] and proc.returncode == 0, proc.stderr[-3000:]


def test_two_ranks_train_as_one_process_with_the_whole_batch(tmp_path: Path) -> None:
    """--ranks 2: torch's program on two local processes (64 samples each a step, DDP over gloo) follows
    torch's on one process with batches of 128, step for step (torch only: its launcher starts fastest;
    Keras's and paddle's two-process runs are measured in docs/generated-program.md)."""
    spec = tmp_path / "mlp.json"
    spec.write_text(zoo.template("mlp").model_dump_json(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "flowtrain", "check-training", str(spec), "--steps", "10", "--ranks",
                           "2", "--frameworks", "torch", "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    report = json.loads(proc.stdout)
    assert report["ranks"] == 2 and report["frameworks"]["torch"]["status"] == "ok", report
    one = report["one_rank"]
    assert one["status"] == "ok", one
    assert one["loss_diff"] <= 1e-4 and one["weight_diff"] <= 1e-3, one
    assert report["ok"] and proc.returncode == 0, proc.stderr[-3000:]
