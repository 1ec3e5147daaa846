"""The Runs page shows a sweep: its points sorted by the sweep's metric with the best one marked, a chart
of the metric against each swept value, and one button that cancels every point still going."""

from __future__ import annotations

import json
import sys

from core import zoo
from core.codegen import generate
from core.sweep import expand_sweep, sweep_from_dict
from portal.users import default_local_user
from schedulers.base import JobRequest, JobStatus, Resources, RunState
from schedulers.local import LocalExecutor
from schedulers.reconcile import reconcile
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until
from tests.portal.conftest import assert_no_exception

SWEEP = {"parameters": {"training.optimizer.lr": [0.001, 0.01], "nodes.linear1.out_features": [16, 64]},
         "parallelism": 1, "metric": {"name": "val_accuracy", "goal": "max"}}
SCORES = {0: 0.6, 1: 0.9, 2: 0.7}  # point 3 is still running


def _sweep(registry: RunRegistry) -> tuple[str, list[str]]:
    """A sweep of four points: three completed with results, the last one a real local job that runs until
    it is stopped (so cancelling has something to stop)."""
    user = default_local_user()
    spec = zoo.template("mlp")
    plan = expand_sweep(spec, sweep_from_dict(SWEEP))
    sweep = registry.create_sweep(user=user, name=spec.name, spec_json=spec.to_json(), sweep_json=json.dumps(SWEEP),
                                  points=[p.values for p in plan.points], scheduler="local", framework="torch",
                                  parallelism=1, metric="val_accuracy", goal="max")
    runs = [registry.create_run(user=user, spec_json=v.to_json(), spec_hash=v.spec_hash(), framework="torch",
                                scheduler="local", name=spec.name, run_id=f"{sweep.id}-{p.index}", sweep_id=sweep.id,
                                sweep_point=p.index) for p, v, _ in plan.variants()]
    for (point, variant, _), run in zip(plan.variants(), runs, strict=True):
        generate(variant, "torch").write(run.run_dir)
        if point.index in SCORES:
            (run.run_dir / "result.json").write_text(json.dumps({"val_accuracy": SCORES[point.index]}))
            registry.mark_submitted(run.id, f"done{point.index}")
            registry.record_status(run.id, JobStatus(job_id="x", state=RunState.COMPLETED, exit_code=0))
    last = runs[-1]
    (last.run_dir / "train.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    executor = LocalExecutor(registry.home / "local", python=sys.executable)
    group = executor.submit_array([JobRequest(run_dir=last.run_dir, name="sweep", framework="torch",
                                              resources=Resources(cpus_per_task=1))], 1, sweep.sweep_dir)
    registry.set_sweep_job(sweep.id, group.job_id)
    registry.mark_submitted(last.id, group.task_ids[0])
    return sweep.id, [r.id for r in runs]


def test_a_sweep_is_a_ranked_table_with_charts_and_one_cancel(app, portal_env):
    registry = RunRegistry(home=portal_env / "home")
    sweep_id, run_ids = _sweep(registry)
    at = app("pages/runs.py")
    assert at.selectbox(key="sweeps.selected").value == sweep_id
    table = at.dataframe[1].value  # the runs, then the sweep's points
    assert list(table["point"]) == [1, 2, 0, 3], "best first by val_accuracy; the running point last"
    assert list(table["best"]) == ["★", "", "", ""]
    assert list(table["training.optimizer.lr"]) == [0.001, 0.01, 0.001, 0.01]
    assert list(table["nodes.linear1.out_features"]) == [64, 16, 16, 64]
    assert list(table["val_accuracy"])[:3] == [0.9, 0.7, 0.6]
    assert any(s.value.startswith("Best: point 1 (training.optimizer.lr = 0.001, nodes.linear1.out_features = 64): "
                                  "val_accuracy 0.9") for s in at.success)
    charts = [json.loads(c.proto.spec) for c in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart")]
    titles = {c.get("title", {}).get("text") if isinstance(c.get("title"), dict) else c.get("title") for c in charts}
    assert {"val_accuracy vs training.optimizer.lr", "val_accuracy vs nodes.linear1.out_features"} <= titles
    assert set(at.dataframe[0].value["sweep"]) == {f"{sweep_id} #{i}" for i in range(4)}  # the runs list shows it

    at.button(key="sweeps.cancel").click().run()
    assert_no_exception(at)
    assert any(i.value == f"Cancel requested for every point of sweep {sweep_id}." for i in at.info)
    wait_until(lambda: reconcile(registry, {"local": LocalExecutor(registry.home / "local")}) is not None
               and registry.get(run_ids[-1]).state == RunState.CANCELLED, timeout=60, message="the point to end")
    assert [registry.get(r).state for r in run_ids] == [RunState.COMPLETED] * 3 + [RunState.CANCELLED]
    at.run()
    assert at.button(key="sweeps.cancel").disabled, "nothing left to cancel"
