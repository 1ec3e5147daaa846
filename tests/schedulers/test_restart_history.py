"""A restart's line in the run's history, from a real job log of the dev cluster (torch, 2 nodes,
rank 1 killed with SIGKILL after the first epoch's checkpoint; job.sbatch started attempt 2, which
resumed from step 12 and completed) and the error file the job script kept from attempt 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedulers.rank_errors import Layout, failure_reason
from schedulers.restarts import attempts, restart_events

LOG = (Path(__file__).parent / "data" / "joblog_torch_restarted.txt").read_text(encoding="utf-8")
RANK0 = ("rank 0 (n1): RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
         "Connection closed by peer [127.0.0.1]:28368. This is typically caused by a remote worker crashing.")
TWO_NODES = Layout(nodes=2, per_node=1)
RESUMED = "resumed from /home/u/runs/RUN/checkpoints/ckpt-12.pt (step 12, epoch 2)\n"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    kept = tmp_path / "attempts" / "1" / "ranks"
    kept.mkdir(parents=True)
    (kept / "rank-0.error").write_text(RANK0 + "\n")
    return tmp_path


def test_the_log_shows_each_attempt_with_its_nodes() -> None:
    assert [(a.number, a.of) for a in attempts(LOG)] == [(1, 3), (2, 3)]


def test_a_restart_says_which_rank_was_lost_where_and_from_which_step(run_dir: Path) -> None:
    assert restart_events(run_dir, LOG, "torch", TWO_NODES, recorded=0, final=False) == [
        "restart 1 of 2: rank 1 (n2) lost (killed by signal 9, SIGKILL); resumed from step 12"]
    assert restart_events(run_dir, LOG, "torch", TWO_NODES, recorded=1, final=True) == []  # said once


def test_a_restart_waits_until_its_attempt_says_where_it_resumed(run_dir: Path) -> None:
    early = LOG[:LOG.index(RESUMED)]
    assert restart_events(run_dir, early, "torch", TWO_NODES, recorded=0, final=False) == []
    assert restart_events(run_dir, early, "torch", TWO_NODES, recorded=0, final=True) == [
        "restart 1 of 2: rank 1 (n2) lost (killed by signal 9, SIGKILL); ended before it resumed"]


def test_a_rank_lost_before_the_first_checkpoint_starts_again_from_step_0(run_dir: Path) -> None:
    """No checkpoint yet: the program trains from the start and says nothing of a resume."""
    [event] = restart_events(run_dir, LOG.replace(RESUMED, ""), "torch", TWO_NODES, recorded=0, final=False)
    assert event.endswith("; started again from step 0 (no checkpoint yet)")


def test_the_final_reason_comes_from_the_last_attempt_only(run_dir: Path) -> None:
    """Attempt 2 completed: attempt 1's kill is no reason for anything that happens after it."""
    assert failure_reason(run_dir, LOG, "torch", TWO_NODES) is None
    assert failure_reason(run_dir / "attempts" / "1", LOG[:LOG.index("flowtrain: attempt 2 of 3")], "torch",
                          TWO_NODES) == "rank 1 (n2) lost (killed by signal 9, SIGKILL)"
