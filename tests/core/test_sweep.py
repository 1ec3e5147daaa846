"""Sweep expansion: grid and seeded random points, every path and every variant checked up front, every
problem reported at once with the path named and the valid ones listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import CommandError, SpecError
from core.load import load_spec
from core.sweep import SETTING_PATHS, best_index, expand_sweep, load_sweep, sweep_from_dict, sweepable_paths

REPO = Path(__file__).resolve().parents[2]
SPEC = load_spec(REPO / "examples" / "digits_cnn.json")


def problems(doc: dict[str, object]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        expand_sweep(SPEC, sweep_from_dict(doc))
    found: dict[str, str] = {}
    for p in err.value.problems:
        found[p.location] = found.get(p.location, "") + str(p)
    return found


def test_grid_is_every_combination_in_task_order_each_a_validated_variant() -> None:
    plan = expand_sweep(SPEC, sweep_from_dict({"parameters": {"training.optimizer.lr": [0.001, 0.01],
                                                              "data.batch_size": [16, 32],
                                                              "nodes.dropout1.p": [0.1, 0.3]}}))
    assert [p.index for p in plan.points] == list(range(8))
    assert plan.points[1].values == {"training.optimizer.lr": 0.001, "data.batch_size": 16, "nodes.dropout1.p": 0.3}
    last, _ = plan.variant(plan.points[-1])
    assert (last.training.optimizer.lr, last.data.batch_size, last.node("dropout1").params["p"]) == (0.01, 32, 0.3)
    assert last.node("dropout2").params == SPEC.node("dropout2").params  # only the swept node changed
    assert plan.variant(plan.points[0])[1].ok and len({v.spec_hash() for _, v, _ in plan.variants()}) == 8
    assert plan.parallelism == 4  # the default limit


def test_random_is_seeded_within_ranges_and_the_budget() -> None:
    doc = {"method": "random", "samples": 5, "seed": 7, "max_points": 5, "parallelism": 9,
           "parameters": {"training.optimizer.lr": {"min": 1e-4, "max": 1e-1, "scale": "log"},
                          "data.batch_size": {"min": 8, "max": 64, "integer": True},
                          "training.optimizer.name": ["sgd", "adam"]}}
    one, two = (expand_sweep(SPEC, sweep_from_dict(doc)) for _ in range(2))
    assert [p.values for p in one.points] == [p.values for p in two.points]  # same seed, same points
    other = expand_sweep(SPEC, sweep_from_dict({**doc, "seed": 8}))
    assert [p.values for p in other.points] != [p.values for p in one.points]
    for p, variant, _ in one.variants():
        assert 1e-4 <= p.values["training.optimizer.lr"] <= 1e-1
        assert isinstance(p.values["data.batch_size"], int) and 8 <= p.values["data.batch_size"] <= 64
        assert variant.training.optimizer.name in ("sgd", "adam")
    assert len(one.points) == 5 and one.parallelism == 5  # never more at once than there are points


def test_every_bad_path_is_named_with_the_valid_ones_all_at_once() -> None:
    found = problems({"parameters": {"training.optimizer.lrr": [1], "nodes.nope.p": [0.1], "nodes.dropout1.q": [1],
                                     "training.resources.nodes": [1, 2], "data.source": ["sklearn:iris"],
                                     "training.optimizer.lr": [0.01]}})
    assert set(found) == {f"sweep.parameters.{p}" for p in ("training.optimizer.lrr", "nodes.nope.p",
                                                            "nodes.dropout1.q", "training.resources.nodes",
                                                            "data.source")}
    assert "training.optimizer.lr, training.optimizer.momentum" in found["sweep.parameters.training.optimizer.lrr"]
    assert "conv1, relu1" in found["sweep.parameters.nodes.nope.p"]
    assert "expected one of: nodes.dropout1.p" in found["sweep.parameters.nodes.dropout1.q"]
    assert "one job array" in found["sweep.parameters.training.resources.nodes"]


def test_each_variant_is_validated_as_a_full_spec_and_problems_name_the_points() -> None:
    found = problems({"parameters": {"training.optimizer.lr": [0.01, 20.0], "nodes.fc1.out_features": [0, 64],
                                     "nodes.nope.p": [0.1]}})
    assert "sweep.parameters.nodes.nope.p" in found  # the path problem and the variants' problems together
    assert "received 20" in found["training.optimizer.lr"] and "(sweep points 2, 3)" in found["training.optimizer.lr"]
    assert "(sweep point 0)" in found["model.nodes[fc1].params.out_features"]  # 2 stops at its lr already


def test_budget_method_and_metric_are_checked() -> None:
    found = problems({"parameters": {"training.optimizer.lr": [0.1, 0.2, 0.3], "data.batch_size": [8, 16]},
                      "max_points": 4, "metric": {"name": "val_mae"}})
    assert "received 6 points" in found["sweep.max_points"] and "max_points = 4" in found["sweep.max_points"]
    assert "val_loss, val_accuracy" in found["sweep.metric.name"]
    found = problems({"parameters": {"training.optimizer.lr": {"min": 0.1, "max": 0.01, "scale": "log"}}})
    assert "a grid needs a list of values" in found["sweep.parameters.training.optimizer.lr"]
    found = problems({"method": "random", "parameters": {"training.optimizer.lr": [0.1]}})
    assert "needs the number of points" in found["sweep.samples"]
    found = problems({"method": "random", "samples": 9, "max_points": 3, "parameters": {"training.seed": [1, 2]}})
    assert "over the budget" in found["sweep.samples"]


def test_a_sweep_may_rank_by_each_task_s_own_metrics() -> None:
    from core import zoo

    for template, good, bad in (("unet", "val_mIoU", "val_accuracy"), ("gpt_mini", "val_perplexity", "val_mse")):
        sweep = {"parameters": {"training.optimizer.lr": [0.001, 0.01]}, "metric": {"name": good, "goal": "max"}}
        assert len(expand_sweep(zoo.template(template), sweep_from_dict(sweep)).points) == 2
        with pytest.raises(SpecError) as err:
            expand_sweep(zoo.template(template), sweep_from_dict({**sweep, "metric": {"name": bad}}))
        assert [p.location for p in err.value.problems] == ["sweep.metric.name"], err.value.problems


def test_a_sweep_file_is_strict_json(tmp_path: Path) -> None:
    bad = tmp_path / "sweep.json"
    bad.write_text(json.dumps({"method": "grid", "parameters": {"training.seed": [1]}, "paralelism": 2}))
    with pytest.raises(SpecError, match=r"sweep\.paralelism: unknown key"):
        load_sweep(bad)
    bad.write_text('{"parameters": {"training.optimizer.lr": [NaN]}}')
    with pytest.raises(SpecError, match="NaN is not a finite number"):
        load_sweep(bad)
    with pytest.raises(CommandError, match="no such file"):
        load_sweep(tmp_path / "missing.json")


def test_paths_and_ranking_helpers() -> None:
    assert "training.optimizer.lr" in SETTING_PATHS and "data.batch_size" in SETTING_PATHS
    assert not any(p.startswith(("training.resources", "training.framework")) for p in SETTING_PATHS)
    assert "nodes.conv1.kernel_size" in sweepable_paths(SPEC)
    assert best_index({0: 0.5, 1: 0.9, 2: None, 3: 0.9}, "max") == 1  # a tie goes to the earlier point
    assert best_index({0: 0.5, 1: 0.2, 2: None}, "min") == 1
    assert best_index({0: None}, "max") is None


SWEEP_MEMORY_SCRIPT = """
import json, sys
from core import zoo
from core.sweep import expand_sweep, sweep_from_dict
def peak_kb():  # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child of a large pytest starts high
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
spec = zoo.template("resnet50")
sweep = sweep_from_dict({"method": "random", "samples": 1000, "max_points": 1000,
                         "parameters": {"training.optimizer.lr": {"min": 1e-4, "max": 1e-1, "scale": "log"}}})
before = peak_kb()
plan = expand_sweep(spec, sweep)
peak = peak_kb()
first = plan.variant(plan.points[0])[0]
print(json.dumps({"points": len(plan.points), "before_kb": before, "peak_kb": peak, "lr": first.training.optimizer.lr}))
"""


@pytest.mark.slow
def test_a_thousand_point_sweep_of_resnet50_does_not_keep_every_variant() -> None:
    """Expansion validates every point but keeps only its values: memory does not grow with the points
    (it kept each variant's spec and analysis, about 0.46 MB each for resnet50, 0.5 GB for 1,000)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", SWEEP_MEMORY_SCRIPT], cwd=repo, capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout)
    grown_mb = (figures["peak_kb"] - figures["before_kb"]) / 1024
    assert figures["points"] == 1000 and 1e-4 <= figures["lr"] <= 1e-1
    assert figures["peak_kb"] < 1024 * 1024, figures  # under 1 GB in all
    assert grown_mb < 64, f"expanding 1,000 points grew the peak by {grown_mb:.0f} MB: {figures}"


def test_the_restart_budget_is_the_sweeps_not_a_points() -> None:
    """Every point runs the one job script of the array, so its restarts are the base spec's: a sweep
    over training.restarts would be ignored point by point, and is refused instead."""
    found = problems({"parameters": {"training.restarts": [0, 2]}})
    assert set(found) == {"sweep.parameters.training.restarts"}
    assert "cannot be swept" in found["sweep.parameters.training.restarts"]
    assert "one restart budget" in found["sweep.parameters.training.restarts"]
