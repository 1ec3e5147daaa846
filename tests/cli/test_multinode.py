"""Multi-node training through the real dev Slurm cluster, in every framework: ``run SPEC --scheduler
slurm --wait`` with 2 nodes x 1 task and 2 nodes x 2 tasks completes, every rank takes part, and a
rank that dies ends the whole job at once (srun --kill-on-bad-exit) instead of leaving the others
waiting until the time limit. Every rank ends with the same weights (each records their SHA-256 in
ranks/rank-N.json), and a failed job's reason in ``flowtrain status`` is the failing rank's last
error (ranks/rank-N.error), or, for a rank killed by a signal, what its launcher saw.

The dev cluster's nodes all run on this one host, so tasks of different nodes share it: ports must
come from a task's rank in the job, never from its index on its node (Keras' Slurm resolver did the
latter, and the second node's worker failed with "Could not start gRPC server"). The nodes' GPUs are
stand-ins: every program runs on the CPU, with two tasks per node as on a node with two GPUs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, cli_env, flowtrain, small_spec
from tests.helpers import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.frameworks, pytest.mark.usefixtures("slurm_cluster")]


def _spec(tmp_path: Path, framework: str, nodes: int, gpus: int) -> Path:
    path = small_spec(tmp_path)
    doc = json.loads(path.read_text())
    doc["training"]["framework"] = framework
    doc["training"]["resources"].update(nodes=nodes, gpus_per_node=gpus, partition="gpu" if gpus else "cpu")
    path.write_text(json.dumps(doc))
    return path


# 2 nodes x 1 task in torch and paddle: the uninterrupted reference run of each framework's restart
# test (tests/cli/test_restarts.py) is that run, through the same job script, and asserts the same.
@pytest.mark.parametrize(("framework", "gpus"), [("keras", 0)] + [(fw, 2) for fw in ("torch", "keras", "paddle")])
def test_two_nodes_train_to_completion_with_every_rank(framework: str, gpus: int, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    out = flowtrain(env, "run", str(_spec(tmp_path, framework, 2, gpus)), "--scheduler", "slurm", "--wait",
                    "--framework", framework, "--max-steps", "4", "--timeout", "420", timeout=480)
    [run] = RunRegistry(home=home).list_runs(ME)
    log = (run.run_dir / f"slurm-{run.job_id}.out").read_text()
    assert out.returncode == 0 and run.state is RunState.COMPLETED, out.stdout + out.stderr + log
    world = 2 * max(gpus, 1)
    assert re.search(rf"training on \S+ x{world}:", log), f"expected {world} processes in the log:\n{log}"
    result = RunRegistry(home=home).result(run.id)
    assert result["steps"] == 4
    digests = {path.name: json.loads(path.read_text())["weights_sha256"] for path in (run.run_dir / "ranks").glob("*.json")}
    assert sorted(digests) == [f"rank-{rank}.json" for rank in range(world)], digests
    assert set(digests.values()) == {result["weights_sha256"]}, f"the ranks ended with different weights: {digests}"


# The variable that holds a training process's rank in the job, as each framework's launcher sets it.
RANK_VARIABLE = {"torch": "RANK", "keras": "SLURM_PROCID", "paddle": "PADDLE_TRAINER_ID"}


def _submit_long_run(tmp_path: Path, framework: str, *args: str) -> tuple[dict[str, str], Path, RunRegistry, Any]:
    """A 2-node run of 50 epochs (``args``, e.g. --max-steps, go to ``flowtrain run``), submitted without
    waiting, with no restarts: its first failure fails the run (restarts: tests/cli/test_restarts.py)."""
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    spec = _spec(tmp_path, framework, 2, 0)
    doc = json.loads(spec.read_text())
    doc["training"]["epochs"] = 50  # far longer than the tests wait
    doc["training"]["restarts"] = 0
    spec.write_text(json.dumps(doc))
    submitted = flowtrain(env, "run", str(spec), "--scheduler", "slurm", "--framework", framework, *args)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    reg = RunRegistry(home=home)
    [run] = reg.list_runs(ME)
    return env, home, reg, run


# Slurm's states of a job that is certainly not over yet: while squeue says one of these, the run's
# ``status`` need not be asked.
UNDER_WAY = {"PENDING", "CONFIGURING", "RUNNING"}


def job_under_way(env: dict[str, str], job_id: str) -> bool:
    """Whether Slurm still lists ``job_id`` as pending or running (``squeue``: a few milliseconds of
    CPU, where each ``flowtrain status`` is a Python process of about a second, which polled back to
    back took a core from the job's ranks on a 2-core machine). False when squeue cannot say."""
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    return out.returncode == 0 and out.stdout.strip() in UNDER_WAY


def _final_status(env: dict[str, str], run_id: str, timeout: float) -> dict[str, Any]:
    """``flowtrain status RUN --json`` once the run has ended (asked once Slurm no longer runs its job)."""
    job_id = RunRegistry(home=Path(env["FLOWTRAIN_HOME"])).get(run_id, ME).job_id

    def ended() -> dict[str, Any] | None:
        if job_under_way(env, job_id):
            return None
        doc = json.loads(flowtrain(env, "status", run_id, "--json").stdout)
        return doc if doc["state"] in ("FAILED", "CANCELLED", "NODE_FAIL", "COMPLETED", "TIMEOUT") else None

    return wait_until(ended, timeout=timeout, message="the job to end after one rank died")


# Rank 1 lost, on a node of the job, by its own launcher's report or by what the survivor said.
LOST_RANK_1 = (r"rank 1 \(n[1-4]\) lost(?: \(killed by signal 9, SIGKILL\)|: (?:it wrote no error and )?"
               r"rank 0 (?:timed out waiting for it|lost its connection to it|failed waiting for it))")


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
@pytest.mark.alone
def test_a_rank_that_dies_fails_the_whole_job_within_a_minute(framework: str, tmp_path: Path) -> None:
    """Rank 1 is killed mid-run (SIGKILL: it writes nothing); the other rank would wait for it in the
    next collective until the time limit without srun's --kill-on-bad-exit. The reason names rank 1
    as the lost one whichever launcher reports first: with the signal when its launcher reported it,
    else from the survivor that waited for it (schedulers/rank_errors.py)."""
    env, home, reg, run = _submit_long_run(tmp_path, framework)
    metrics = run.run_dir / "metrics.jsonl"
    wait_until(lambda: metrics.is_file() and '"event": "train"' in metrics.read_text(), timeout=240,
               message=lambda: f"the job to start training: {reg.get(run.id, ME).state}")
    victims = wait_until(lambda: _rank_processes(run.run_dir, framework, 1), timeout=30, message="rank 1's process")
    killed = time.monotonic()
    for pid in victims:
        os.kill(pid, 9)
    final = _final_status(env, run.id, timeout=60)
    log = (run.run_dir / f"slurm-{run.job_id}.out").read_text()
    assert final["state"] == "FAILED" and time.monotonic() - killed < 60, log
    assert re.fullmatch(LOST_RANK_1, final["reason"]), final["reason"] + "\n" + log
    shown = flowtrain(env, "status", run.id).stdout
    assert f"reason     {final['reason']}" in shown, shown


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_the_error_that_ends_one_rank_is_the_reason_of_the_failed_run(framework: str, tmp_path: Path) -> None:
    """Only rank 1 fails, for real: the file it must write at the end (ranks/rank-1.json, its
    weights' digest) is taken by a folder, as a full quota or a stale mount would break one node's
    write. ``status`` shows rank 1's error, not rank 0's consequential one nor just "exit code 1"
    (paddle's launcher keeps a worker's traceback in a private folder: the job log has none)."""
    env, home, reg, run = _submit_long_run(tmp_path, framework, "--max-steps", "4")
    (run.run_dir / "ranks" / "rank-1.json").mkdir(parents=True)  # long before the job's first step
    final = _final_status(env, run.id, timeout=300)
    log = (run.run_dir / f"slurm-{run.job_id}.out").read_text()
    assert final["state"] == "FAILED", log
    assert re.fullmatch(r"rank 1 \(\S+\): IsADirectoryError: \[Errno 21\] Is a directory: .*rank-1\.json'",
                        final["reason"]), final["reason"] + "\n" + log


def _rank_processes(run_dir: Path, framework: str, rank: int) -> list[int]:
    """The training processes of ``rank`` in ``run_dir`` (not their launchers: those lack the rank variable)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # the process ended while we looked
            continue
        if b"train.py" in cmdline and f"FLOWTRAIN_RUN_DIR={run_dir}".encode() in environ \
                and f"{RANK_VARIABLE[framework]}={rank}".encode() in environ:
            found.append(int(pid))
    return found
