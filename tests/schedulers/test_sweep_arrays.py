"""A sweep's jobs as one group: the job array's script (each task in its own run directory), its tasks
as squeue and slurmrestd list them, the REST transport's --array, and the local executor's limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from schedulers.base import ArrayExecutor, ArraySubmission, JobRequest, Resources, RunState, SchedulerError
from schedulers.local import LocalExecutor
from schedulers.slurm.executor import SlurmExecutor
from schedulers.slurm.parsing import array_task_ids, jobs_from_squeue_json
from schedulers.slurm.pyslurm_transport import PyslurmTransport
from schedulers.slurm.rest_transport import job_properties
from schedulers.slurm.sbatch import JobArray, render_sbatch
from tests.helpers import wait_until
from tests.schedulers.test_slurm_integration import make_transport
from tests.slurm_fixture import DevCluster


def array_dirs(parent: Path, n: int) -> tuple[Path, ...]:
    dirs = tuple(parent / f"sweep-1-{i}" for i in range(n))
    for d in dirs:
        d.mkdir(parents=True)
    return dirs


def test_array_script_runs_each_task_in_its_own_run_directory(tmp_path: Path) -> None:
    dirs = array_dirs(tmp_path / "my runs", 6)  # a space in the folder: quoted, never split
    request = JobRequest(run_dir=dirs[0], name="sweep", framework="torch", resources=Resources(cpus_per_task=1))
    text = render_sbatch(request, "/usr/bin/python3", array=JobArray(dirs, 2))
    lines = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --array=0-5%2" in lines
    assert f'#SBATCH --output="{tmp_path}/my runs/sweep-1-%a/slurm-%A_%a.out"' in lines
    assert f'#SBATCH --chdir="{tmp_path}/my runs"' in lines
    # the task picks its directory by SLURM_ARRAY_TASK_ID: run the script's own lines up to the launch
    body = text[text.index("point_dirs=("):text.index("export FLOWTRAIN_RUN_DIR") + len("export FLOWTRAIN_RUN_DIR")]
    for task in (0, 3, 5):
        out = subprocess.run(["bash", "-euc", body + '\necho "$PWD|$FLOWTRAIN_RUN_DIR"'], capture_output=True,
                             text=True, env={"SLURM_ARRAY_TASK_ID": str(task), "PATH": "/usr/bin:/bin"}, check=True)
        assert out.stdout.strip() == f"{dirs[task]}|{dirs[task]}"
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def test_array_directories_must_follow_the_task_pattern(tmp_path: Path) -> None:
    dirs = array_dirs(tmp_path, 3)
    request = JobRequest(run_dir=dirs[0], name="s", framework="torch")
    with pytest.raises(ValueError, match="<folder>/<prefix><task id>"):
        render_sbatch(request, "p", array=JobArray((dirs[0], dirs[2]), 1))
    with pytest.raises(ValueError, match="parallelism"):
        render_sbatch(request, "p", array=JobArray(dirs, 0))
    assert "--array" not in render_sbatch(request, "p")  # a single job is unchanged


def test_squeue_lists_array_tasks_by_array_and_task_id() -> None:
    """Records as Slurm 22.05's squeue --json gives them (seen on the dev cluster): started tasks have
    their own record; the pending ones share the array's record; the last task keeps the array's number."""
    records = [
        {"job_id": 305, "array_job_id": 304, "array_task_id": 0, "array_task_string": "", "job_state": "RUNNING"},
        {"job_id": 306, "array_job_id": 304, "array_task_id": 1, "array_task_string": "", "job_state": "COMPLETED",
         "exit_code": 0},
        {"job_id": 304, "array_job_id": 304, "array_task_id": None, "array_task_string": "2-3,5%2",
         "job_state": "PENDING", "state_reason": "JobArrayTaskLimit"},
        {"job_id": 299, "array_job_id": 0, "array_task_id": None, "array_task_string": "", "job_state": "RUNNING"},
    ]
    jobs = jobs_from_squeue_json(records)
    assert set(jobs) == {"304_0", "304_1", "304_2", "304_3", "304_5", "299"}
    assert jobs["304_0"].state == RunState.RUNNING and jobs["304_1"].state == RunState.COMPLETED
    assert jobs["304_3"].state == RunState.PENDING and jobs["304_3"].reason == "JobArrayTaskLimit"
    assert jobs["304_3"].job_id == "304_3"
    assert array_task_ids("0-9:3%2") == [0, 3, 6, 9] and array_task_ids("") == []


def test_rest_transport_passes_the_array_on(tmp_path: Path) -> None:
    dirs = array_dirs(tmp_path, 4)
    request = JobRequest(run_dir=dirs[0], name="s", framework="torch")
    job = job_properties(render_sbatch(request, "/usr/bin/python3", array=JobArray(dirs, 3)), {"PATH": "/bin"})
    assert job["array"] == "0-3%3"
    assert job["standard_output"] == f"{tmp_path}/sweep-1-%a/slurm-%A_%a.out"


def test_local_group_runs_at_most_k_at_once_and_cancels_together(tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path / "state", cpus=8, gpus=0, kill_after_s=5)
    assert isinstance(executor, ArrayExecutor)
    dirs = array_dirs(tmp_path / "runs", 4)
    for d in dirs:  # a program that runs until it is stopped
        (d / "train.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    requests = [JobRequest(run_dir=d, name="s", framework="torch", resources=Resources(cpus_per_task=1))
                for d in dirs]
    group = executor.submit_array(requests, 2, tmp_path)
    assert isinstance(group, ArraySubmission) and len(group.task_ids) == 4 and group.job_id == group.task_ids[0]
    states = executor.statuses(group.task_ids)
    assert [states[t].state for t in group.task_ids] == [RunState.RUNNING] * 2 + [RunState.PENDING] * 2
    assert "at most 2 points of this sweep" in states[group.task_ids[2]].reason
    # another job is not held back by the group's limit
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "train.py").write_text("print('hi')\n")
    other = executor.submit(JobRequest(run_dir=tmp_path / "other", name="o", framework="torch",
                                       resources=Resources(cpus_per_task=1)))
    wait_until(lambda: executor.status(other).state == RunState.COMPLETED, timeout=60, message="the other job")
    executor.cancel_array(group)
    wait_until(lambda: all(s.state == RunState.CANCELLED for s in executor.statuses(group.task_ids).values()),
               timeout=60, message=lambda: str(executor.statuses(group.task_ids)))
    assert all(executor.job(t).started is None for t in group.task_ids[2:])  # the pending ones never started


def test_the_pyslurm_transport_refuses_arrays_with_the_fix(tmp_path: Path) -> None:
    """pyslurm addresses jobs by number and cannot follow <array>_<task>: the executor says so before
    submitting anything (the transport is built without libslurm here; the refusal needs none)."""
    executor = SlurmExecutor(commands=object.__new__(PyslurmTransport))
    dirs = array_dirs(tmp_path, 2)
    requests = [JobRequest(run_dir=d, name="s", framework="torch") for d in dirs]
    with pytest.raises(SchedulerError, match="FLOWTRAIN_SLURM_TRANSPORT=commands or rest"):
        executor.submit_array(requests, 1, tmp_path)
    assert not (tmp_path / "job.sbatch").exists()


@pytest.mark.slurm
@pytest.mark.parametrize("kind", ["commands", pytest.param("rest", marks=pytest.mark.slurmrestd)])
def test_an_array_runs_and_cancels_through_each_transport(tmp_path: Path, slurm_cluster: DevCluster,
                                                          kind: str) -> None:
    """Through Slurm's commands and through slurmrestd: one array whose tasks each run in their own run
    directory and are followed by ``<array>_<task>``; then one whose cancel ends every task at once."""
    executor = SlurmExecutor(slurm_conf=slurm_cluster.slurm_conf, python=sys.executable,
                             commands=make_transport(kind, slurm_cluster))
    dirs = array_dirs(tmp_path / "done", 3)
    for d in dirs:
        (d / "train.py").write_text("import os\nopen('task', 'w').write(os.environ['SLURM_ARRAY_TASK_ID'])\n")
    requests = [JobRequest(run_dir=d, name="fttest-array", framework="torch", resources=Resources(cpus_per_task=1))
                for d in dirs]
    done = executor.submit_array(requests, 2, tmp_path / "done")
    assert done.task_ids == tuple(f"{done.job_id}_{i}" for i in range(3))
    wait_until(lambda: all(s.state == RunState.COMPLETED for s in executor.statuses(done.task_ids).values()),
               timeout=120, message=lambda: str(executor.statuses(done.task_ids)))
    for i, d in enumerate(dirs):
        assert (d / "task").read_text() == str(i) and (d / f"slurm-{done.job_id}_{i}.out").is_file()

    sleepers = array_dirs(tmp_path / "cancel", 4)
    for d in sleepers:
        (d / "train.py").write_text("import time\ntime.sleep(300)\n")
    group = executor.submit_array([JobRequest(run_dir=d, name="fttest-array", framework="torch",
                                              resources=Resources(cpus_per_task=1)) for d in sleepers],
                                  1, tmp_path / "cancel")
    try:
        wait_until(lambda: executor.status(group.task_ids[0]).state == RunState.RUNNING, timeout=60,
                   message="the first task to run")
        assert {executor.status(t).state for t in group.task_ids[1:]} == {RunState.PENDING}  # %1
        executor.cancel_array(group)
        wait_until(lambda: all(s.state == RunState.CANCELLED for s in executor.statuses(group.task_ids).values()),
                   timeout=60, message=lambda: str(executor.statuses(group.task_ids)))
    finally:
        slurm_cluster.commands.run(["scancel", group.job_id])
