"""Restarts within the allocation on the real dev Slurm cluster (training.restarts,
schedulers/restarts.py): rank 1 of a 2-node run is killed with SIGKILL after the first epoch's
checkpoint; the job script starts the program again, it resumes from its newest checkpoint, and the
run completes. Its history says which rank was lost on which node and from which step it went on,
``status`` shows ``restarts 1/2``, and every rank ends with the same weights; with a budget of 0 the
same kill fails the run (tests/cli/test_multinode.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from schedulers.registry.runs import RunRegistry
from tests.cli.test_multinode import _final_status, _rank_processes, _spec
from tests.cli.test_run_commands import ME, cli_env, flowtrain
from tests.helpers import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.frameworks, pytest.mark.usefixtures("slurm_cluster")]

# Of 12 steps each, a checkpoint at the end of every epoch. Rank 1 is killed once the first epoch's
# checkpoint exists and a step past 12 is logged: 3 epochs leave the kill 22 steps in which to land
# before the end, and every epoch more trains both ranks of the killed run and of the reference
# (~1 s a step on a loaded 2-core CI machine).
EPOCHS = 3
# Every framework's resume is bit-exact: the same generated program, killed after its first
# checkpoint and started again, ends with the uninterrupted run's digest (scripts/chaos.sh, 5 of 5
# killed runs in each framework, docs/reliability.md), so the restarted run must end with exactly the
# weights of an uninterrupted one.
EXACT_RESUME = {"torch", "keras", "paddle"}


def _digests(run_dir: Path) -> dict[str, str]:
    return {p.name: json.loads(p.read_text())["weights_sha256"] for p in (run_dir / "ranks").glob("rank-*.json")}


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_a_killed_rank_restarts_from_the_checkpoint_and_the_run_completes(framework: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    spec = _spec(tmp_path, framework, 2, 0)
    doc = json.loads(spec.read_text())
    doc["training"]["epochs"] = EPOCHS  # restarts unset: Slurm's default budget, 2
    spec.write_text(json.dumps(doc))
    reference = None
    if framework in EXACT_RESUME:  # the same spec, uninterrupted, beside it on the same nodes
        ref_home = tmp_path / "reference"
        ref_env = cli_env(ref_home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
        started = flowtrain(ref_env, "run", str(spec), "--scheduler", "slurm", "--framework", framework)
        assert started.returncode == 0, started.stdout + started.stderr
        [reference] = RunRegistry(home=ref_home).list_runs(ME)
    submitted = flowtrain(env, "run", str(spec), "--scheduler", "slurm", "--framework", framework)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    reg = RunRegistry(home=home)
    [run] = reg.list_runs(ME)
    checkpoints, metrics = run.run_dir / "checkpoints", run.run_dir / "metrics.jsonl"

    def past_first_checkpoint() -> bool:
        steps = [json.loads(ln)["step"] for ln in metrics.read_text().splitlines()
                 if '"event": "train"' in ln] if metrics.is_file() else []
        return any(checkpoints.glob("ckpt-12*")) and max(steps, default=0) > 12

    wait_until(past_first_checkpoint, timeout=300, interval=0.05,
               message=lambda: f"the first epoch's checkpoint: {reg.get(run.id, ME).state}")
    victims = wait_until(lambda: _rank_processes(run.run_dir, framework, 1), timeout=30, message="rank 1's process")
    for pid in victims:
        os.kill(pid, 9)
    final = _final_status(env, run.id, timeout=400)
    log = (run.run_dir / f"slurm-{run.job_id}.out").read_text()
    assert final["state"] == "COMPLETED", json.dumps(final["history"], indent=1) + "\n" + log
    restarts = [h["detail"] for h in final["history"] if h["detail"].startswith("restart ")]
    assert len(restarts) == 1, restarts
    said = re.fullmatch(r"restart 1 of 2: rank 1 \(n[1-4]\) lost.*; resumed from step (\d+)", restarts[0])
    assert said and int(said.group(1)) >= 12 and int(said.group(1)) % 12 == 0, restarts[0]
    assert final["restarts_within_allocation"] == {"used": 1, "budget": 2}
    shown = flowtrain(env, "status", run.id).stdout
    assert "restarts 1/2" in shown, shown
    result = reg.result(run.id)
    assert result is not None and result["steps"] == EPOCHS * 12
    digests = _digests(run.run_dir)
    assert sorted(digests) == ["rank-0.json", "rank-1.json"] and set(digests.values()) == {result["weights_sha256"]}
    if reference is not None:  # also what a plain 2-node x 1 task run must do (tests/cli/test_multinode.py)
        ended = _final_status(ref_env, reference.id, timeout=400)
        ref_log = (reference.run_dir / f"slurm-{reference.job_id}.out").read_text()
        assert ended["state"] == "COMPLETED", json.dumps(ended, indent=1) + "\n" + ref_log
        assert re.search(r"training on \S+ x2:", ref_log), f"expected 2 processes in the log:\n{ref_log}"
        assert RunRegistry(home=ref_home).result(reference.id)["steps"] == EPOCHS * 12
        ref_digests = _digests(reference.run_dir)
        assert sorted(ref_digests) == ["rank-0.json", "rank-1.json"], ref_digests
        assert set(ref_digests.values()) == {result["weights_sha256"]}, "not the uninterrupted weights"


def test_a_rank_lost_before_the_first_checkpoint_starts_from_step_0_and_a_cancel_ends_the_restarts(
        tmp_path: Path) -> None:
    """Rank 1 is killed before any checkpoint exists: attempt 2 trains from step 0 and the history
    says so. The user then cancels the run: it ends CANCELLED, with no third attempt."""
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    spec = _spec(tmp_path, "torch", 2, 0)
    doc = json.loads(spec.read_text())
    doc["training"]["epochs"] = 50  # far longer than the test waits
    spec.write_text(json.dumps(doc))
    submitted = flowtrain(env, "run", str(spec), "--scheduler", "slurm", "--framework", "torch")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    reg = RunRegistry(home=home)
    [run] = reg.list_runs(ME)
    metrics, log = run.run_dir / "metrics.jsonl", run.run_dir / f"slurm-{run.job_id}.out"
    wait_until(lambda: metrics.is_file() and '"event": "train"' in metrics.read_text(), timeout=300, interval=0.05,
               message="the first train record")
    assert not any((run.run_dir / "checkpoints").glob("ckpt-*"))  # the first one comes after 12 steps
    for pid in wait_until(lambda: _rank_processes(run.run_dir, "torch", 1), timeout=30, message="rank 1's process"):
        os.kill(pid, 9)

    def restarted() -> list[str]:
        # The history has the restart once attempt 2 said where it trains from: until the job log
        # shows that, a read of the log, not a ``flowtrain status`` process (about a second of CPU).
        attempt_2 = log.read_text().partition("flowtrain: attempt 2 of")[2] if log.is_file() else ""
        if "training on " not in attempt_2:
            return []
        doc = json.loads(flowtrain(env, "status", run.id, "--json").stdout)
        return [h["detail"] for h in doc["history"] if h["detail"].startswith("restart ")]

    [event] = wait_until(restarted, timeout=300, message="attempt 2 to start training")
    assert re.fullmatch(r"restart 1 of 2: rank 1 \(n[1-4]\) lost.*; started again from step 0 \(no checkpoint yet\)",
                        event), event
    cancelled = flowtrain(env, "cancel", run.id)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    final = _final_status(env, run.id, timeout=120)
    assert final["state"] == "CANCELLED", final
    text = log.read_text()
    assert "flowtrain: attempt 2 of 3" in text and "flowtrain: attempt 3 of 3" not in text, text
    assert final["restarts_within_allocation"] == {"used": 1, "budget": 2}
