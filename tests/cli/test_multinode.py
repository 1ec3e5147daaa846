"""Multi-node training through the real dev Slurm cluster, in every framework: ``run SPEC --scheduler
slurm --wait`` with 2 nodes x 1 task and 2 nodes x 2 tasks completes, every rank takes part, and a
rank that dies ends the whole job at once (srun --kill-on-bad-exit) instead of leaving the others
waiting until the time limit.

The dev cluster's nodes all run on this one host, so tasks of different nodes share it: ports must
come from a task's rank in the job, never from its index on its node (Keras' Slurm resolver did the
latter, and the second node's worker failed with "Could not start gRPC server"). The nodes' GPUs are
stand-ins: every program runs on the CPU, with two tasks per node as on a node with two GPUs.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from schedulers.base import RunState
from schedulers.runs import RunRegistry
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


@pytest.mark.parametrize(("framework", "gpus"), [(fw, gpus) for fw in ("torch", "keras", "paddle") for gpus in (0, 2)])
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
    assert RunRegistry(home=home).result(run.id)["steps"] == 4


def test_a_rank_that_dies_fails_the_whole_job_within_a_minute(tmp_path: Path) -> None:
    """Rank 1 is killed mid-run (its program exits with an error at once); the other rank would wait
    for it in the next collective until the time limit without srun's --kill-on-bad-exit."""
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    spec = _spec(tmp_path, "torch", 2, 0)
    doc = json.loads(spec.read_text())
    doc["training"]["epochs"] = 50  # far longer than the test waits
    spec.write_text(json.dumps(doc))
    submitted = flowtrain(env, "run", str(spec), "--scheduler", "slurm", "--framework", "torch")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    [run] = RunRegistry(home=home).list_runs(ME)
    metrics = run.run_dir / "metrics.jsonl"
    reg = RunRegistry(home=home)
    wait_until(lambda: metrics.is_file() and '"event": "train"' in metrics.read_text(), timeout=240,
               message=lambda: f"the job to start training: {reg.get(run.id, ME).state}")
    victims = wait_until(lambda: _rank_processes(run.run_dir, 1), timeout=30, message="rank 1's process")
    killed = time.monotonic()
    for pid in victims:
        os.kill(pid, 9)

    def state() -> str:
        return json.loads(flowtrain(env, "status", run.id, "--json").stdout)["state"]

    final = wait_until(lambda: (s := state()) in ("FAILED", "CANCELLED", "NODE_FAIL", "COMPLETED") and s,
                       timeout=60, message="the job to end after one rank died")
    assert final == "FAILED" and time.monotonic() - killed < 60


def _rank_processes(run_dir: Path, rank: int) -> list[int]:
    """The training processes of ``rank`` in ``run_dir`` (torchrun gives each worker RANK)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # the process ended while we looked
            continue
        if b"train.py" in cmdline and f"FLOWTRAIN_RUN_DIR={run_dir}".encode() in environ \
                and f"RANK={rank}".encode() in environ:
            found.append(int(pid))
    return found
