"""The failing rank's error as a failed run's reason: job logs captured from the dev cluster (one
rank of a 2-node run killed with SIGKILL, or raising) with the ranks' error files as the generated
programs write them, and the registry recording the reason when a real local job fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schedulers.base import JobRequest, Resources, RunState
from schedulers.local import LocalExecutor
from schedulers.rank_errors import MAX_REASON_CHARS, failure_reason, launcher_reports, rank_errors
from schedulers.reconcile import reconcile
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until

DATA = Path(__file__).parent / "data"
# what rank 0 wrote once its peer was gone: a consequence, never the reason
CONSEQUENCE = ("rank 0 (n2): RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer "
               "[127.0.0.1]:23701. This is typically caused by a remote worker crashing.")
RAISED = "rank 1 (n1): IsADirectoryError: [Errno 21] Is a directory: 'ranks/rank-1.json.tmp' -> 'ranks/rank-1.json'"


def _log(name: str) -> str:
    return (DATA / f"joblog_{name}.txt").read_text(encoding="utf-8")


def _errors(run_dir: Path, *lines: tuple[int, str]) -> None:
    """ranks/rank-N.error files, written one second apart in the given order."""
    folder = run_dir / "ranks"
    folder.mkdir(parents=True, exist_ok=True)
    for i, (rank, line) in enumerate(lines):
        path = folder / f"rank-{rank}.error"
        path.write_text(line + "\n")
        os.utime(path, ns=(1_000_000_000 * (100 + i),) * 2)


@pytest.mark.parametrize(("framework", "node"), [("torch", "n1"), ("keras", "n2"), ("paddle", "n2")])
def test_a_rank_killed_by_a_signal_is_the_reason_not_the_error_it_caused(framework: str, node: str,
                                                                           tmp_path: Path) -> None:
    """torchrun's root cause block, srun's "task 1: Killed" (keras: a task per rank) and paddle's
    "Container rank 0 … code -9" of the launcher whose node rank is 1 all name global rank 1."""
    _errors(tmp_path, (0, CONSEQUENCE))
    assert failure_reason(tmp_path, _log(f"{framework}_killed"), framework) == \
        f"rank 1 ({node}) killed by signal 9 (SIGKILL)"


def test_paddle_reports_every_dead_worker_with_its_global_rank() -> None:
    """The survivor aborted (SIGABRT) after its peer was killed: reported second, as rank 0."""
    reports = launcher_reports(_log("paddle_killed"), "paddle")
    assert [(r.rank, r.signal) for r in reports] == [(1, 9), (0, 6)]


def test_a_survivor_that_aborted_first_is_not_the_reason(tmp_path: Path) -> None:
    """Rank 0's gloo timed out the moment its peer was killed and it aborted (SIGABRT); its launcher
    reported that before rank 1's launcher polled its killed worker (a CI run's real log). The
    killed rank is the reason, on its own node (n2), not srun's first failed task's (n1)."""
    log = _log("paddle_killed_survivor_first")
    assert [(r.rank, r.signal, r.node) for r in launcher_reports(log, "paddle")] == [(0, 6, "n1"), (1, 9, "n2")]
    assert failure_reason(tmp_path, log, "paddle") == "rank 1 (n2) killed by signal 9 (SIGKILL)"


def test_a_rank_that_raised_is_the_reason_when_its_error_came_first(tmp_path: Path) -> None:
    """torchrun's root cause is rank 1 with exit code 1 (no signal): the error written first wins."""
    _errors(tmp_path, (1, RAISED), (0, CONSEQUENCE))
    assert failure_reason(tmp_path, _log("torch_raised"), "torch") == RAISED
    assert [rank for rank, _ in rank_errors(tmp_path)] == [1, 0]


def test_nothing_is_guessed_without_an_error_file_or_a_signal(tmp_path: Path) -> None:
    assert failure_reason(tmp_path, _log("torch_raised"), "torch") is None
    assert failure_reason(tmp_path, "", "keras") is None


def test_error_files_are_read_safely_and_the_reason_is_one_short_line(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("a private line\n")
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank-0.error").symlink_to(secret)  # a link planted in the run directory
    (tmp_path / "ranks" / "notes.error").write_text("not a rank's file\n")
    assert failure_reason(tmp_path, "", "torch") is None
    (tmp_path / "ranks" / "rank-2.error").write_text("rank 2 (n3): ValueError:\n" + "x " * 5000)
    reason = failure_reason(tmp_path, "", "torch")
    assert reason is not None and reason.startswith("rank 2 (n3): ValueError: x x")
    assert len(reason) == MAX_REASON_CHARS and "\n" not in reason


FAILING_RANK = """\
import os, sys
os.makedirs("ranks", exist_ok=True)
with open("ranks/rank-1.error", "w") as f:
    f.write("rank 1 (n2): RuntimeError: CUDA error: an illegal memory access was encountered\\n")
sys.exit(1)
"""


def test_the_registry_records_the_ranks_error_as_the_failed_runs_reason(tmp_path: Path) -> None:
    reg = RunRegistry(home=tmp_path / "home")
    ex = LocalExecutor(reg.home / "local", cpus=1, gpus=0)
    run = reg.create_run(user="alice", spec_json="{}", spec_hash="h", framework="torch", scheduler="local")
    (run.run_dir / "train.py").write_text(FAILING_RANK)
    reg.mark_submitted(run.id, ex.submit(JobRequest(run_dir=run.run_dir, name="t", framework="torch",
                                                    resources=Resources(cpus_per_task=1))))
    wait_until(lambda: reconcile(reg, {"local": ex}) and reg.get(run.id).is_final, message="the job to fail")
    failed = reg.get(run.id)
    assert (failed.state, failed.exit_code) == (RunState.FAILED, 1)
    assert failed.reason == "rank 1 (n2): RuntimeError: CUDA error: an illegal memory access was encountered"
    assert failed.reason in reg.history(run.id)[-1].detail
