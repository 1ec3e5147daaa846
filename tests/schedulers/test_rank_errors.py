"""The failing rank's error as a failed run's reason: job logs captured from the dev cluster (one
rank of a 2-node run killed with SIGKILL, or raising) with the ranks' error files as the generated
programs write them, and the registry recording the reason when a real local job fails."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from schedulers.base import JobRequest, Resources, RunState
from schedulers.local import LocalExecutor
from schedulers.rank_errors import MAX_REASON_CHARS, Layout, failure_reason, launcher_reports, peer_losses, rank_errors
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


TWO_NODES = Layout(nodes=2, per_node=1)
# rank 0's own words in a real keras run whose rank 1 was killed (TensorFlow names the lost peer's task)
KERAS_CONSEQUENCE = (
    "rank 0 (n1): UnavailableError: Graph execution error: Detected at node while/adam_w/CollectiveReduceV2 "
    "defined at (most recent call last): Collective ops is aborted by: recvmsg:Connection reset by peer "
    "Additional GRPC error information from remote target /job:worker/replica:0/task:1 while calling "
    "/tensorflow.WorkerService/RecvBuf: :UNKNOWN:Error received from peer {grpc_status:14, "
    'grpc_message:"recvmsg:Connection reset by peer"} The error could be from a previous operation. '
    "Restart your program to reset. [[{{node while/adam_w/CollectiveReduceV2}}]] [Op:__inference_run_steps_1485]")
_TORCH_ROOT_RANK1 = re.compile(r"Traceback \(most recent call last\):\ntorch\.distributed\.elastic\.multiprocessing"
                               r"\.errors\.ChildFailedError: \n=+\n.*?\n=+\n", re.S)
_TORCH_ROOT_RANK0 = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
train.py FAILED
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-30_16:50:33
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 24154)
  error_file: <N/A>
======================================================
"""


def _torch(order: str) -> str:
    """torchrun's reports of the real kill (rank 1's launcher saw its worker killed, -9), or the
    survivor's launcher first (rank 0 exited 1 on the closed connection), or rank 1's never at all
    (srun ended its torchrun before it reported)."""
    log = _log("torch_killed")
    if order == "survivor first":
        first = _TORCH_ROOT_RANK1.search(log)
        assert first is not None  # the fixture's rank 1 block
        return log[:first.start()] + "Traceback (most recent call last):\n" + _TORCH_ROOT_RANK0 + log[first.start():]
    if order == "killed never reported":
        return _TORCH_ROOT_RANK1.sub("", log, count=1)
    return log


def _keras(order: str) -> str:
    """srun's lines of the real kill (task 1 Killed, then srun ends task 0), or task 0's exit seen
    first (task 1's Killed after srun's Terminating), or task 1's line missing."""
    log = _log("keras_killed")
    killed, terminating = "srun: error: n2: task 1: Killed\n", "srun: launch/slurm: _step_signal: Terminating StepId=310.0\n"
    assert killed + terminating in log  # the fixture's own order
    if order == "survivor first":
        return log.replace(killed + terminating, "srun: error: n1: task 0: Exited with exit code 1\n" + terminating + killed)
    if order == "killed never reported":  # the job script's attempt line lists the nodes in Slurm's order
        return "flowtrain: attempt 1 of 1 on n1,n2\n" + log.replace(killed, "")
    return log


def _paddle(order: str) -> str:
    """Three real orders of paddle's launcher reports: rank 1's -9 first, rank 0's -6 (gloo timeout)
    first, and rank 0's -6 only: srun ended rank 1's launcher before it reported (the CI failure,
    reconstructed from a dev-cluster log: see the fixture's commit)."""
    return _log({"killed first": "paddle_killed", "survivor first": "paddle_killed_survivor_first",
                 "killed never reported": "paddle_killed_never_reported"}[order])


ORDERS = ("killed first", "survivor first", "killed never reported")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("framework", "node"), [("torch", "n1"), ("keras", "n2"), ("paddle", "n2")])
def test_the_killed_rank_is_the_reason_whichever_launcher_reports_first(framework: str, node: str, order: str,
                                                                         tmp_path: Path) -> None:
    """Rank 1 was killed (SIGKILL: it writes nothing), rank 0 failed waiting for it. Whichever
    launcher's report reaches the log first, or whether rank 1's reaches it at all, the reason is
    rank 1, lost, on its own node: torch's survivor wrote its error on n2, so rank 1 ran on n1."""
    if framework == "torch":
        _errors(tmp_path, (0, CONSEQUENCE))
    elif framework == "keras":
        _errors(tmp_path, (0, KERAS_CONSEQUENCE))
    log = {"torch": _torch, "keras": _keras, "paddle": _paddle}[framework](order)
    reason = failure_reason(tmp_path, log, framework, TWO_NODES)
    if order == "killed never reported" and framework != "paddle":
        waited = "lost its connection to it" if framework == "keras" else "failed waiting for it"
        assert re.fullmatch(rf"rank 1 \({node}\) lost: (it wrote no error and )?rank 0 {waited}", reason or ""), reason
    elif order == "killed never reported":
        assert reason == f"rank 1 ({node}) lost: rank 0 timed out waiting for it"
    else:
        assert reason == f"rank 1 ({node}) lost (killed by signal 9, SIGKILL)"


def test_paddle_reports_every_dead_worker_with_its_global_rank() -> None:
    """The survivor aborted (SIGABRT) after its peer was killed: reported second, as rank 0; the
    reconstructed CI log has rank 0's report alone, and gloo's line names the peer it waited for."""
    assert [(r.rank, r.signal) for r in launcher_reports(_log("paddle_killed"), "paddle")] == [(1, 9), (0, 6)]
    log = _log("paddle_killed_never_reported")
    assert [(r.rank, r.signal, r.node) for r in launcher_reports(log, "paddle")] == [(0, 6, "n1")]
    assert {(loss.by, loss.peer) for loss in peer_losses(log, [])} == {(0, 1)}


def test_a_survivor_that_aborted_first_is_not_the_reason(tmp_path: Path) -> None:
    """Rank 0's gloo timed out the moment its peer was killed and it aborted (SIGABRT); its launcher
    reported that before rank 1's launcher polled its killed worker (a CI run's real log). The
    killed rank is the reason, on its own node (n2), not srun's first failed task's (n1), even
    without the job's layout."""
    log = _log("paddle_killed_survivor_first")
    assert [(r.rank, r.signal, r.node) for r in launcher_reports(log, "paddle")] == [(0, 6, "n1"), (1, 9, "n2")]
    assert failure_reason(tmp_path, log, "paddle") == "rank 1 (n2) lost (killed by signal 9, SIGKILL)"


def test_a_survivor_that_aborted_on_a_connection_reset_names_no_rank_yet_is_not_the_reason(tmp_path: Path) -> None:
    """A stress run's real log: rank 0's gloo read failed with "Connection reset by peer" (an address,
    no pair_rank) and it aborted (SIGABRT, no error file); srun then ended rank 1's launcher with
    SIGTERM before it reported the kill. Rank 0 lost its peer, so rank 1 is the lost one."""
    log = _log("paddle_connection_reset")
    assert [(r.rank, r.signal) for r in launcher_reports(log, "paddle")] == [(0, 6)]
    assert failure_reason(tmp_path, log, "paddle", TWO_NODES) == \
        "rank 1 (n2) lost: it wrote no error and rank 0 failed waiting for it"


def test_a_restarted_runs_reason_comes_from_its_last_attempt(tmp_path: Path) -> None:
    """The job script marks each attempt; an earlier attempt's reports say nothing of the last one."""
    log = (_log("paddle_killed") + "flowtrain: attempt 2 of 2 on n1,n2\n" + _log("paddle_killed_never_reported"))
    assert failure_reason(tmp_path, log, "paddle", TWO_NODES) == "rank 1 (n2) lost: rank 0 timed out waiting for it"


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
