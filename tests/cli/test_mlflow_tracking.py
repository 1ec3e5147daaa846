"""Completed runs logged to a real MLflow server (``[tracking] mlflow_uri`` / ``MLFLOW_TRACKING_URI``).

The test starts ``mlflow server`` (sqlite backend store, a local artifact root served by the server)
on 127.0.0.1 from its own venv (``.venv-mlflow``, made by ``scripts/setup.sh --test``: mlflow
3.17.2 would replace the portal's pinned pyarrow 26.0.1 with 25.0.1), trains a 2-point sweep of a
tiny digits MLP and a lone run of it through the command line, and reads everything back with
MLflow's own client, in that venv. A server that is down or refuses leaves the run COMPLETED with a warning in its history.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedulers.base import JobStatus, RunState
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from schedulers.tracking import metric_points, track_pending
from tests.cli.test_run_commands import ME, cli_env, flowtrain
from tests.cli.test_sweep_commands import MLP
from tests.helpers import free_port, wait_until

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MLFLOW_VENV = REPO / ".venv-mlflow"
READ_BACK = r"""
import hashlib, json, sys, tempfile
from mlflow.tracking import MlflowClient
client = MlflowClient(sys.argv[1])
experiment = client.get_experiment_by_name(sys.argv[2])
runs = []
for r in client.search_runs([experiment.experiment_id], max_results=100):
    history = {k: [[m.step, m.value] for m in client.get_metric_history(r.info.run_id, k)] for k in r.data.metrics}
    artifacts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for a in client.list_artifacts(r.info.run_id):
            local = client.download_artifacts(r.info.run_id, a.path, tmp)
            artifacts[a.path] = hashlib.sha256(open(local, "rb").read()).hexdigest()
    runs.append({"id": r.info.run_id, "name": r.info.run_name, "status": r.info.status, "params": r.data.params,
                 "tags": r.data.tags, "metrics": history, "artifacts": artifacts})
print(json.dumps(runs))
"""


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mlflow server`` on a free loopback port; its URI."""
    mlflow = MLFLOW_VENV / "bin" / "mlflow"
    assert mlflow.is_file(), f"{mlflow} is missing: run scripts/setup.sh --test (it makes .venv-mlflow)"
    tmp = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen([str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                               "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
                               "--artifacts-destination", str(tmp / "artifacts")],
                              stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: server.poll() is not None or _healthy(uri), timeout=300,  # migrating a new sqlite store
                   message=lambda: (tmp / "server.log").read_text()[-2000:])
        assert server.poll() is None, (tmp / "server.log").read_text()[-2000:]
        yield uri
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def read_back(uri: str, experiment: str = "FlowTrain") -> list[dict[str, Any]]:
    """Every run of ``experiment``, as MLflow's own client sees it."""
    done = subprocess.run([str(MLFLOW_VENV / "bin" / "python"), "-c", READ_BACK, uri, experiment], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def check_logged(mine: dict[str, Any], run: Run, name: str) -> None:
    """One FlowTrain run as MLflow holds it: name, status, tags, the spec's params, the training
    loss and learning rate per logged step, the final validation accuracy, the artifacts' bytes."""
    assert (mine["name"], mine["status"]) == (name, "FINISHED")
    assert {k: mine["tags"][k] for k in ("framework", "scheduler", "job_id", "spec_hash", "user")} == {
        "framework": "torch", "scheduler": "local", "job_id": run.job_id, "spec_hash": run.spec_hash, "user": ME}
    assert mine["tags"]["flowtrain.run_id"] == run.id
    assert mine["params"]["training.optimizer.lr"] == str(run.spec().training.optimizer.lr)
    assert mine["params"]["data.source"] == "sklearn:digits" and mine["params"]["model.nodes"] == "7"
    assert int(mine["params"]["model.params"]) == 64 * 32 + 32 + 32 * 10 + 10
    records = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["event"] == "train"]
    assert mine["metrics"]["train_loss"] == [[r["step"], pytest.approx(r["loss"])] for r in train]
    assert mine["metrics"]["lr"] == [[r["step"], pytest.approx(r["lr"])] for r in train]
    result = json.loads((run.run_dir / "result.json").read_text())
    assert mine["metrics"]["val_accuracy"] == [[4, pytest.approx(result["val_accuracy"])]]
    assert mine["artifacts"] == {name: _sha(run.run_dir / name) for name in ("model.onnx", "spec.json", "result.json")}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_sweep_and_its_runs_appear_in_mlflow_with_metrics_and_artifacts(mlflow_server: str,
                                                                          tmp_path: Path) -> None:
    """A 2-point sweep through the command line: a parent MLflow run and one child per point, each
    point a complete FlowTrain run."""
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, MLFLOW_TRACKING_URI=mlflow_server)
    (tmp_path / "spec.json").write_text(json.dumps({**MLP, "name": "tracked"}))
    sweep = {"method": "grid", "parameters": {"training.optimizer.lr": [0.001, 0.1]}, "parallelism": 2,
             "metric": {"name": "val_accuracy", "goal": "max"}}
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    swept = flowtrain(env, "sweep", str(tmp_path / "spec.json"), "--sweep", str(tmp_path / "sweep.json"),
                      "--scheduler", "local", "--wait", "--max-steps", "4", "--json")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    sweep_id = json.loads(swept.stdout)["id"]

    registry = RunRegistry(home=home)
    local = [registry.get(r.id) for r in registry.list_runs(ME)]
    assert len(local) == 2 and all(r.state == RunState.COMPLETED for r in local)
    for run in local:
        assert "logged to MLflow" in registry.history(run.id)[-1].detail, registry.history(run.id)
    logged = {r["tags"].get("flowtrain.run_id") or r["tags"]["flowtrain.sweep_id"]: r for r in read_back(mlflow_server)}
    assert set(logged) == {r.id for r in local} | {sweep_id}

    parent = logged[sweep_id]
    assert parent["params"]["sweep.metric"] == "val_accuracy" and parent["params"]["sweep.points"] == "2"
    children = [logged[r.id] for r in local]
    assert all(c["tags"]["mlflow.parentRunId"] == parent["id"] for c in children)
    assert sorted(float(c["params"]["training.optimizer.lr"]) for c in children) == [0.001, 0.1]

    for run in local:
        check_logged(logged[run.id], run, "tracked")


def test_a_lone_run_appears_in_mlflow_with_its_params_tags_metrics_and_artifacts(mlflow_server: str,
                                                                                 tmp_path: Path) -> None:
    """A run outside any sweep, through the command line, into the experiment the settings file names:
    an MLflow run of its own (no parent), every metric's history equal to its ``metrics.jsonl``."""
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, MLFLOW_TRACKING_URI=mlflow_server)
    with open(env["FLOWTRAIN_CONFIG"], "a", encoding="utf-8") as config:
        config.write('[tracking]\nexperiment = "Lone runs"\n')
    (tmp_path / "spec.json").write_text(json.dumps({**MLP, "name": "alone"}))
    ran = flowtrain(env, "run", str(tmp_path / "spec.json"), "--scheduler", "local", "--wait", "--max-steps", "4")
    assert ran.returncode == 0, ran.stdout + ran.stderr

    registry = RunRegistry(home=home)
    [listed] = registry.list_runs(ME)
    run = registry.get(listed.id)
    assert run.state == RunState.COMPLETED and run.sweep_id is None
    assert registry.history(run.id)[-1].detail.startswith(f"logged to MLflow {mlflow_server}: experiment Lone runs")
    [mine] = read_back(mlflow_server, "Lone runs")
    assert "mlflow.parentRunId" not in mine["tags"] and "sweep.point" not in mine["params"]
    check_logged(mine, run, "alone")
    assert mine["params"]["training.epochs"] == "1" and mine["params"]["data.batch_size"] == "64"

    records = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    expected: dict[str, list[list[Any]]] = {}
    for r in records:  # the mapping docs/tracking.md states, written out again from the records
        names: dict[str, str] = {}
        if r["event"] == "train":
            names = {"loss": "train_loss", "accuracy": "train_accuracy", "lr": "lr", "samples_per_s": "samples_per_s"}
        elif r["event"] == "epoch":
            names = {"loss": f"{'train_epoch' if r['split'] == 'train' else r['split']}_loss",
                     "accuracy": f"{'train_epoch' if r['split'] == 'train' else r['split']}_accuracy"}
        elif r["event"] == "end":  # the final validation, unless an epoch record already gave it
            names = {k: k for k in r if k.startswith("val_") and [r["step"], r[k]] not in expected.get(k, [])}
        for field, key in names.items():
            if field in r:
                expected.setdefault(key, []).append([r["step"], pytest.approx(r[field])])
    assert {"train_loss", "lr", "samples_per_s", "val_loss", "val_accuracy"} <= set(expected)
    assert mine["metrics"] == expected


def test_a_server_down_or_refusing_leaves_the_run_completed_with_a_warning(mlflow_server: str,
                                                                           tmp_path: Path) -> None:
    registry = RunRegistry(home=tmp_path / "home")
    spec = json.dumps({**MLP, "name": "unlogged"})
    runs = []
    for _ in range(2):
        run = registry.create_run(user=ME, spec_json=spec, spec_hash="h", framework="torch", scheduler="local")
        registry.record_status(run.id, JobStatus("1", RunState.COMPLETED, exit_code=0))
        runs.append(run)
    closed = f"http://127.0.0.1:{free_port()}"
    [note] = track_pending(registry, [runs[0].id], uri=closed)
    assert note.startswith(f"warning: not logged to MLflow: the MLflow server {closed} cannot be reached")
    [note] = track_pending(registry, [runs[1].id], uri=f"{mlflow_server}/no/such/prefix")
    assert note.startswith(f"warning: not logged to MLflow: {mlflow_server}/no/such/prefix refused GET") and "404" in note
    for run in runs:
        assert registry.get(run.id).state == RunState.COMPLETED
        assert registry.history(run.id)[-1].detail.startswith("warning: not logged to MLflow")
    assert registry.pending_tracking() == [] and track_pending(registry, uri=closed) == []  # tried once, recorded


def test_metric_names_follow_the_records() -> None:
    records = [{"event": "start", "step": 0, "world_size": 1, "time": 1.0},
               {"event": "train", "step": 2, "split": "train", "loss": 0.5, "lr": 0.1, "samples_per_s": 9.0, "time": 2.0},
               {"event": "epoch", "step": 3, "split": "train", "loss": 0.4, "lr": 0.1, "time": 3.0},
               {"event": "epoch", "step": 3, "split": "val", "loss": 0.3, "accuracy": 0.9, "time": 3.0},
               {"event": "end", "step": 3, "steps": 3, "val_loss": 0.3, "weights_sha256": "x", "time": 4.0}]
    assert [(p["key"], p["step"], p["value"]) for p in metric_points(records)] == [
        ("train_loss", 2, 0.5), ("lr", 2, 0.1), ("samples_per_s", 2, 9.0), ("train_epoch_loss", 3, 0.4),
        ("val_loss", 3, 0.3), ("val_accuracy", 3, 0.9)]  # the end's val_loss repeats the epoch's: once
