"""``python -m flowtrain sweep``: one spec, a sweep file, every point a run, all points one job array.

Real everything: the command line in a subprocess, the real local executor and the real dev Slurm
cluster (asked with ``sacct``/``squeue`` whether the points really were one array). The model is a
tiny digits MLP trained for a few steps, so a 4-point sweep takes well under two minutes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, cli_env, flowtrain
from tests.helpers import wait_until
from tests.slurm_fixture import DevCluster

MLP = {
    "schema_version": 1, "name": "fttest-sweep",
    "data": {"source": "sklearn:digits", "batch_size": 64, "validation_split": 0.2, "num_workers": 0,
             "preprocessing": [{"op": "scale", "max_value": 16.0}]},
    "model": {"nodes": [{"id": "input", "op": "Input"}, {"id": "flatten", "op": "Flatten"},
                        {"id": "fc1", "op": "Linear", "params": {"out_features": 32}}, {"id": "relu1", "op": "ReLU"},
                        {"id": "dropout1", "op": "Dropout", "params": {"p": 0.1}},
                        {"id": "fc2", "op": "Linear", "params": {"out_features": 10}}, {"id": "output", "op": "Output"}],
              "edges": [{"source": a, "target": b} for a, b in (("input", "flatten"), ("flatten", "fc1"),
                                                                 ("fc1", "relu1"), ("relu1", "dropout1"),
                                                                 ("dropout1", "fc2"), ("fc2", "output"))]},
    "training": {"framework": "torch", "epochs": 1, "log_every_steps": 2, "resources": {"cpus_per_task": 1},
                 "checkpoint": {"every_steps": 5}},
}
GRID = {"method": "grid", "parameters": {"training.optimizer.lr": [0.0001, 0.01, 0.1], "nodes.dropout1.p": [0.0, 0.5]},
        "max_points": 6, "parallelism": 3, "metric": {"name": "val_accuracy", "goal": "max"}}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def write(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def check_completed_sweep(home: Path, env: dict[str, str], out_json: str, n: int = 6) -> dict[str, Any]:
    """Every point a COMPLETED run with its own metrics and result; the table sorted by the metric with
    the best point marked; `runs` lists the points with their sweep."""
    doc = json.loads(out_json)
    reg = RunRegistry(home=home)
    runs = reg.sweep_runs(doc["id"])
    assert [r.sweep_point for r in runs] == list(range(n)) and all(r.sweep_id == doc["id"] for r in runs)
    assert [r.state for r in runs] == [RunState.COMPLETED] * n
    assert [r.run_dir.name for r in runs] == [f"{doc['id']}-{i}" for i in range(n)]
    for run in runs:
        events = [m["event"] for m in reg.metrics(run.id)]
        assert events[0] == "start" and events[-1] == "end" and "train" in events
        assert 0.0 <= reg.result(run.id)["val_accuracy"] <= 1.0
    points = doc["points"]
    scores = [p["score"] for p in points]
    assert scores == sorted(scores, reverse=True) and None not in scores
    [best] = [p for p in points if p["best"]]
    assert best == points[0] and best["score"] == max(reg.result(r.id)["val_accuracy"] for r in runs)
    assert set(best["values"]) == {"training.optimizer.lr", "nodes.dropout1.p"}
    # each point's spec is its variant: the swept values reached the run's own spec
    for p in points:
        spec = reg.get(p["run"]).spec()
        assert spec.training.optimizer.lr == p["values"]["training.optimizer.lr"]
        assert spec.node("dropout1").params["p"] == p["values"]["nodes.dropout1.p"]
    listed = flowtrain(env, "runs")
    assert listed.returncode == 0 and listed.stdout.count(f"{doc['id']} #") == n
    sweeps = flowtrain(env, "sweeps")
    assert sweeps.returncode == 0 and doc["id"] in sweeps.stdout and f"{n} COMPLETED" in sweeps.stdout
    table = flowtrain(env, "status", doc["id"])
    assert table.returncode == 0 and f"best: point {best['point']}" in table.stdout
    return doc


@pytest.mark.frameworks
def test_local_sweep_runs_every_point_at_most_k_at_once(home: Path, tmp_path: Path) -> None:
    env = cli_env(home, tmp_path)
    grid = {**GRID, "parameters": {"training.optimizer.lr": [0.0001, 0.1], "nodes.dropout1.p": [0.0, 0.5]},
            "max_points": 4, "parallelism": 2}
    out = flowtrain(env, "sweep", str(write(tmp_path, "spec.json", MLP)), "--sweep",
                    str(write(tmp_path, "sweep.json", grid)), "--scheduler", "local", "--wait", "--max-steps", "4",
                    "--json", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = check_completed_sweep(home, env, out.stdout, n=4)
    runs = RunRegistry(home=home).sweep_runs(doc["id"])
    # never more than 2 running at once: at every start, fewer than 2 others had started and not ended
    for run in runs:
        overlapping = [o for o in runs if o.id != run.id and o.started <= run.started < o.ended]
        assert len(overlapping) <= 1, (run.id, [o.id for o in overlapping])


@pytest.mark.slurm
@pytest.mark.frameworks
def test_slurm_sweep_is_one_job_array(home: Path, tmp_path: Path, slurm_cluster: DevCluster) -> None:
    slurm_cluster.need("dbd")  # Slurm's accounting (sacct) says what became of the array's tasks
    env = cli_env(home, tmp_path, SLURM_CONF=slurm_cluster.slurm_conf)
    # 4 points, at most 3 at once: the throttle (%3) still holds one task back
    grid = {**GRID, "parameters": {"training.optimizer.lr": [0.0001, 0.1], "nodes.dropout1.p": [0.0, 0.5]},
            "max_points": 4}
    out = flowtrain(env, "sweep", str(write(tmp_path, "spec.json", MLP)), "--sweep",
                    str(write(tmp_path, "sweep.json", grid)), "--scheduler", "slurm", "--wait", "--max-steps", "4",
                    "--timeout", "240", "--json", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = check_completed_sweep(home, env, out.stdout, n=4)
    array = doc["job_id"]
    runs = RunRegistry(home=home).sweep_runs(doc["id"])
    assert [r.job_id for r in runs] == [f"{array}_{i}" for i in range(4)]
    script = (Path(doc["sweep_dir"]) / "job.sbatch").read_text()
    assert "#SBATCH --array=0-3%3" in script
    # Slurm's own accounting: four tasks of one array job, all completed, each log in its run directory
    acct = slurm_cluster.commands.run(["sacct", "-P", "-n", "-X", "-j", array, "-o", "JobID,State"]).stdout
    rows = dict(line.split("|") for line in acct.splitlines())
    assert rows == {f"{array}_{i}": "COMPLETED" for i in range(4)}, acct
    for run in runs:
        assert (run.run_dir / f"slurm-{run.job_id}.out").is_file()


@pytest.mark.slurm
@pytest.mark.frameworks
def test_cancelling_a_sweep_cancels_the_whole_array(home: Path, tmp_path: Path, slurm_cluster: DevCluster) -> None:
    slurm_cluster.need("dbd")  # Slurm's accounting (sacct) says the tasks were cancelled
    env = cli_env(home, tmp_path, SLURM_CONF=slurm_cluster.slurm_conf)
    spec = {**MLP, "training": {**MLP["training"], "epochs": 2000}}  # runs until cancelled
    out = flowtrain(env, "sweep", str(write(tmp_path, "spec.json", spec)), "--sweep",
                    str(write(tmp_path, "sweep.json", {**GRID, "parallelism": 2})), "--scheduler", "slurm", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    array = doc["job_id"]
    reg = RunRegistry(home=home)
    try:
        def running() -> bool:
            flowtrain(env, "status", doc["id"])  # reconciles
            return sum(r.state == RunState.RUNNING for r in reg.sweep_runs(doc["id"])) == 2

        wait_until(running, timeout=120, message="two points of the array to run")
        cancel = flowtrain(env, "cancel", doc["id"])
        assert cancel.returncode == 0, cancel.stderr
        wait_until(lambda: flowtrain(env, "status", doc["id"]).returncode == 0
                   and all(r.state == RunState.CANCELLED for r in reg.sweep_runs(doc["id"])),
                   timeout=120, message=lambda: str([(r.id, r.state) for r in reg.sweep_runs(doc["id"])]))
    finally:
        slurm_cluster.commands.run(["scancel", array])
    # one scancel of the array: every history says so, and Slurm has no task of it left alive
    for run in reg.sweep_runs(doc["id"]):
        assert any(f"cancel of sweep {doc['id']} requested by {ME}" in h.detail for h in reg.history(run.id))
    tasks = {key: job.state for key, job in slurm_cluster.commands.squeue_jobs().items() if key.startswith(f"{array}_")}
    assert all(state.is_final for state in tasks.values()), tasks
    acct = slurm_cluster.commands.run(["sacct", "-P", "-n", "-X", "-j", array, "-o", "JobID,State"]).stdout
    states = [line.split("|")[1] for line in acct.splitlines()]  # "CANCELLED by 0"; pending tasks share a line
    assert states and all(state.startswith("CANCELLED") for state in states), acct


def test_a_bad_sweep_is_refused_whole_before_anything_is_created(home: Path, tmp_path: Path) -> None:
    env = cli_env(home, tmp_path)
    bad = {**GRID, "parameters": {"training.optimizer.lrr": [0.1], "nodes.dropout1.p": [0.5, 1.5],
                                  "training.resources.nodes": [2]}}
    out = flowtrain(env, "sweep", str(write(tmp_path, "spec.json", MLP)), "--sweep", str(write(tmp_path, "bad.json", bad)),
                    "--scheduler", "local")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "3 problem(s)" in out.stderr
    assert "sweep.parameters.training.optimizer.lrr: is not a setting a sweep can change" in out.stderr
    assert "training.optimizer.lr, training.optimizer.momentum" in out.stderr  # the valid paths beside it
    assert "sweep.parameters.training.resources.nodes: cannot be swept" in out.stderr
    assert "model.nodes[dropout1].params.p: is out of range (sweep point 1)" in out.stderr
    assert RunRegistry(home=home).list_runs() == [] and RunRegistry(home=home).list_sweeps() == []
    check = flowtrain(env, "sweep", str(write(tmp_path, "spec.json", MLP)), "--sweep",
                      str(write(tmp_path, "good.json", GRID)), "--check")
    assert check.returncode == 0 and "6 points, every one a valid spec; at most 3 at once" in check.stdout
