"""``python -m flowtrain run/runs/status/logs/cancel`` end to end, with real generated programs.

Each test gets its own FLOWTRAIN_HOME under tmp_path. The execution environment is this venv's
interpreter, declared in an environments file (so the tests do not pay for a framework probe;
tests/schedulers/test_discovery.py probes for real). examples/digits_cnn.json is trained for a
few steps only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from schedulers.base import RunState
from schedulers.reconcile import reconcile
from schedulers.registry.runs import RunRegistry
from settings.access import os_user
from tests.helpers import wait_until
from tests.slurm_fixture import DevCluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "digits_cnn.json"
ME = os_user()  # the command line's user is the OS user running it


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def cli_env(home: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The command line's environment: its own home, this venv as the environment, and a settings
    file whose data root is ``tmp_path`` (where the tests put their data files)."""
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'[data]\nroots = ["{tmp_path}"]\n', encoding="utf-8")
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({"environments": [
        {"name": "venv", "python": sys.executable,
         "frameworks": {"torch": {"version": "2"}, "keras": {"version": "3"}, "paddle": {"version": "3"}}}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWTRAIN_", "SLURM_"))}
    env.update(FLOWTRAIN_HOME=str(home), FLOWTRAIN_ENVIRONMENTS=str(envs), FLOWTRAIN_CONFIG=str(config), **extra)
    return env


def flowtrain(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def small_spec(tmp_path: Path, **data: Any) -> Path:
    """examples/digits_cnn.json (written by the torch codegen) with one epoch; ``data`` overrides."""
    doc = json.loads(EXAMPLE.read_text())
    doc["training"]["epochs"] = 1
    doc["training"]["log_every_steps"] = 2
    doc["training"]["resources"]["cpus_per_task"] = 1
    doc["data"]["num_workers"] = 0
    doc["data"].update(data)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return path


def check_completed_run(home: Path, env: dict[str, str], scheduler: str) -> None:
    reg = RunRegistry(home=home)
    [run] = reg.list_runs(ME)
    assert (run.state, run.exit_code, run.scheduler, run.framework) == (RunState.COMPLETED, 0, scheduler, "torch")
    assert run.created <= run.started <= run.ended <= time.time()  # what `status` shows as started/ended/time
    assert run.duration == run.ended - run.started
    assert run.selection and run.selection["reasons"][0].startswith("chose torch")
    events = [m["event"] for m in reg.metrics(run.id)]
    assert events[0] == "start" and events[-1] == "end" and "train" in events
    kinds = {a.path: a.kind for a in reg.artifacts(run.id)}
    assert kinds["model/model.pt"] == "model" and kinds["train.py"] == "code" and kinds["metrics.jsonl"] == "metrics"
    assert reg.result(run.id)["steps"] == 6
    assert [h.state for h in reg.history(run.id)][-1] == "COMPLETED"

    listed = json.loads(flowtrain(env, "runs", "--json").stdout)
    assert [r["id"] for r in listed] == [run.id] and listed[0]["state"] == "COMPLETED"
    other = flowtrain(env, "runs", "--user", "someone-else", "--json")
    assert other.returncode == 2 and "only the administrators" in other.stderr
    status = flowtrain(env, "status", run.id, "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["state"] == "COMPLETED" and doc["result"]["steps"] == 6
    assert any(a["path"] == "model/model.pt" for a in doc["artifacts"])
    text = flowtrain(env, "status", run.id).stdout
    assert "COMPLETED (exit code 0)" in text and "model/model.pt" in text
    logs = flowtrain(env, "logs", run.id, "--tail", "2")
    assert logs.returncode == 0 and "done: 6 steps" in logs.stdout and len(logs.stdout.splitlines()) == 2

    # files of any size come out with `fetch` (the portal offers small ones only); never over a file
    copy = home.parent / "fetched.pt"
    fetched = flowtrain(env, "fetch", run.id, "model/model.pt", "--out", str(copy))
    assert fetched.returncode == 0, fetched.stderr
    assert copy.read_bytes() == (run.run_dir / "model" / "model.pt").read_bytes()
    again = flowtrain(env, "fetch", run.id, "model/model.pt", "--out", str(copy))
    assert again.returncode == 1 and "exists already" in again.stderr
    outside = flowtrain(env, "fetch", run.id, "../../flowtrain.toml", "--out", str(home.parent / "x"))
    assert outside.returncode != 0 and "cannot be opened" in outside.stderr and not (home.parent / "x").exists()

    # what the job wrote is its user's alone: 0700 folders, 0600 files
    modes = {str(p.relative_to(run.run_dir)): p.stat().st_mode & 0o777 for p in run.run_dir.rglob("*")}
    assert {m for m in modes.values()} == {0o700, 0o600}, {k: oct(v) for k, v in modes.items()}
    assert modes["model"] == 0o700 and modes["model/model.pt"] == modes["metrics.jsonl"] == 0o600


@pytest.mark.frameworks
def test_run_local_wait_completes(home: Path, tmp_path: Path) -> None:
    env = cli_env(home, tmp_path)
    out = flowtrain(env, "run", str(small_spec(tmp_path)), "--scheduler", "local", "--wait", "--max-steps", "6")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "chose torch on partition local" in out.stdout and "COMPLETED (exit code 0)" in out.stdout
    check_completed_run(home, env, "local")


@pytest.mark.slurm
@pytest.mark.frameworks
@pytest.mark.usefixtures("slurm_cluster")
def test_run_slurm_wait_completes(home: Path, tmp_path: Path) -> None:
    """The same spec as a real Slurm job on the dev cluster (runs this venv's python; the run
    directory is absolute, on this host, so slurmd sees it)."""
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])  # set by the slurm_cluster fixture
    out = flowtrain(env, "run", str(small_spec(tmp_path)), "--scheduler", "slurm", "--wait", "--max-steps", "6",
                    "--timeout", "240")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "torch on slurm partition" in out.stdout and "COMPLETED (exit code 0)" in out.stdout
    check_completed_run(home, env, "slurm")
    run = RunRegistry(home=home).list_runs(ME)[0]
    assert (run.run_dir / "job.sbatch").is_file() and (run.run_dir / f"slurm-{run.job_id}.out").is_file()
    assert run.partition in ("cpu", "gpu")


@pytest.mark.frameworks
def test_failed_run_shows_exit_code_and_log(home: Path, tmp_path: Path) -> None:
    env = cli_env(home, tmp_path)
    spec = small_spec(tmp_path, source=str(tmp_path / "missing.npz"), format="npz", input_shape=[1, 28, 28],
                      num_classes=10)
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED (exit code 2)" in out.stdout and "last lines of the log" in out.stdout
    assert "missing.npz" in out.stdout
    [run] = RunRegistry(home=home).list_runs(ME)
    assert (run.state, run.exit_code) == (RunState.FAILED, 2) and "missing.npz" in (run.log_tail or "")


@pytest.mark.frameworks
def test_cancel_running_run(home: Path, tmp_path: Path) -> None:
    env = cli_env(home, tmp_path)
    spec = small_spec(tmp_path)
    doc = json.loads(spec.read_text())
    doc["training"]["epochs"] = 500
    spec.write_text(json.dumps(doc))
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--json")
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["id"]
    reg = RunRegistry(home=home)
    wait_until(lambda: reg.sync_metrics(run_id) >= 0 and any(m["event"] == "train" for m in reg.metrics(run_id)),
               timeout=120, message="the program to start training")
    cancel = flowtrain(env, "cancel", run_id)
    assert cancel.returncode == 0, cancel.stderr
    wait_until(lambda: json.loads(flowtrain(env, "status", run_id, "--json").stdout)["state"] == "CANCELLED",
               timeout=120, message="the run to be cancelled")
    run = reg.get(run_id)
    assert run.exit_code == 3  # the program wrote a checkpoint on SIGTERM and said so
    assert any(a.kind == "checkpoint" for a in reg.artifacts(run_id))
    assert any(f"cancel requested by {ME}" in h.detail for h in reg.history(run_id))


def test_slurm_unreachable_is_an_error_not_a_local_fallback(home: Path, tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=nowhere\nSlurmctldHost=localhost\nSlurmctldPort=1\n"
                    "NodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n")
    env = cli_env(home, tmp_path, FLOWTRAIN_SCHEDULER="slurm", SLURM_CONF=str(conf))
    out = flowtrain(env, "run", str(EXAMPLE), "--wait", timeout=120)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "SLURM_CONF" in out.stderr and str(conf) in out.stderr
    assert RunRegistry(home=home).list_runs() == []
    assert not list(home.glob("local/jobs/*.json"))  # nothing was started locally instead
    sel = flowtrain(env, "select", str(EXAMPLE), timeout=120)
    assert sel.returncode == 3 and "unreachable" in sel.stderr and "Traceback" not in sel.stderr


def test_bad_arguments_are_clear(home: Path, tmp_path: Path) -> None:
    env = cli_env(home, tmp_path)
    missing = flowtrain(env, "run", str(tmp_path / "nope.json"), "--scheduler", "local")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    unknown = flowtrain(env, "status", "20990101-000000-abcdef")
    assert unknown.returncode == 2 and "no run" in unknown.stderr
    assert flowtrain(env, "runs").stdout.strip() == f"no runs for user {ME}"


@pytest.mark.slurm
@pytest.mark.frameworks
@pytest.mark.resume
def test_node_down_requeues_resumes_and_completes(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   slurm_cluster: DevCluster) -> None:
    """A node goes down under the running --requeue job: the registry shows the requeue, the rerun
    resumes from the last checkpoint and the run completes."""
    from core.load import load_spec
    from schedulers.launch import Executors, submit_run
    from tests.slurm_fixture import TEST_JOB_PREFIX, TEST_REASON

    for key, value in cli_env(home, tmp_path).items():
        if key.startswith("FLOWTRAIN_"):
            monkeypatch.setenv(key, value)
    spec_path = small_spec(tmp_path)
    doc = json.loads(spec_path.read_text())
    doc["training"].update(epochs=3, log_every_steps=1)
    doc["training"]["checkpoint"] = {"every_steps": 3, "every_epoch": True, "keep": 2}
    spec_path.write_text(json.dumps(doc))
    reg = RunRegistry(home=home)
    executors = Executors(home)
    run = submit_run(load_spec(spec_path), registry=reg, user=ME, scheduler="slurm", executors=executors,
                     args=("--max-steps", "40"), job_name=f"{TEST_JOB_PREFIX}-requeue")
    cmds = slurm_cluster.commands
    job_id = str(run.job_id)
    node = ""
    try:
        def checkpointed() -> bool:
            reconcile(reg, executors, run_ids=[run.id])
            return any(m["event"] == "checkpoint" for m in reg.metrics(run.id))

        wait_until(checkpointed, timeout=180, message=lambda: f"a first checkpoint: {reg.get(run.id)}")
        node = executors["slurm"].status(job_id).nodes
        assert node, "the running job reports its node"
        slurm_cluster.update_node(node, State="down", Reason=f"{TEST_REASON}-requeue")

        def requeued() -> bool:
            reconcile(reg, executors, run_ids=[run.id])
            return reg.get(run.id).restarts >= 1

        wait_until(requeued, timeout=120, message=lambda: f"the requeue to show: {reg.history(run.id)}")
        # The node stays down until the rerun has started on another node of the partition: resuming
        # it at once races slurmd's cleanup of the killed job ("Duplicate jobid" drains the node).
        wait_until(lambda: executors["slurm"].status(job_id).state.value in ("PENDING", "RUNNING", "COMPLETED"),
                   timeout=60, message="the job to be pending again")
        if executors["slurm"].status(job_id).state.value == "PENDING":
            slurm_cluster.update_job(job_id, StartTime="now")  # Slurm holds a requeued job ~120 s otherwise

        def final() -> bool:
            reconcile(reg, executors, run_ids=[run.id])
            return reg.get(run.id).is_final

        wait_until(final, timeout=240, interval=0.5, message=lambda: f"the run to end: {reg.history(run.id)}")
    finally:
        if node:
            slurm_cluster.update_node(node, State="resume")
        if not reg.get(run.id).is_final:
            cmds.scancel(job_id)
    done = reg.get(run.id)
    assert (done.state, done.exit_code, done.restarts) == (RunState.COMPLETED, 0, 1), reg.history(run.id)
    details = [h.detail for h in reg.history(run.id)]
    assert any("requeued (restart 1)" in d for d in details), details
    starts = [m for m in reg.metrics(run.id) if m["event"] == "start"]
    assert len(starts) == 2 and starts[0]["resumed_from_step"] == 0
    assert starts[1]["resumed_from_step"] >= 3  # the rerun resumed from a checkpoint
    assert reg.result(run.id)["steps"] == 40
