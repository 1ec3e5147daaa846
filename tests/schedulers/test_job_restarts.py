"""The job script's restarts within the allocation (training.restarts, schedulers/restarts.py), run for
real with bash: a one-process job's script runs its launch line directly, so its loop is the one a
multi-node job runs around srun. The multi-node runs on the dev cluster are in tests/cli/test_restarts.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from schedulers.base import JobRequest, Resources
from schedulers.rank_errors import Layout, failure_reason
from schedulers.registry.runs import RunRegistry
from schedulers.restarts import restart_events
from schedulers.slurm.sbatch import render_sbatch
from tests.cli.test_run_commands import ME, cli_env, flowtrain, small_spec
from tests.helpers import wait_until

# A program that fails its first attempt the way a killed rank does (SIGKILL, after writing an error
# file as a rank that raised would), and completes the next one only if that file was moved away.
FAILS_ONCE = """\
import os, pathlib, signal, sys
ranks = pathlib.Path("ranks"); ranks.mkdir(exist_ok=True)
starts = pathlib.Path("starts"); n = int(starts.read_text()) + 1 if starts.exists() else 1
starts.write_text(str(n))
if n == 1:
    (ranks / "rank-0.error").write_text("rank 0 (n1): RuntimeError: Connection closed by peer\\n")
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(0 if not (ranks / "rank-0.error").exists() else 5)
"""


def _job(tmp_path: Path, program: str, restarts: int) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train.py").write_text(program)
    script = run_dir / "job.sbatch"
    script.write_text(render_sbatch(JobRequest(run_dir=run_dir, name="r", framework="torch",
                                               resources=Resources(), restarts=restarts), python=sys.executable))
    return script


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120)


def test_a_failed_attempt_starts_again_and_its_errors_are_kept_apart(tmp_path: Path) -> None:
    script = _job(tmp_path, FAILS_ONCE, restarts=2)
    done = _run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [re.sub(r" on \S*$", "", ln) for ln in done.stdout.splitlines() if ln.startswith("flowtrain: ")]
    assert said == ["flowtrain: attempt 1 of 3",
                    "flowtrain: attempt 1 failed (exit code 137): starting again from the newest checkpoint",
                    "flowtrain: attempt 2 of 3"], done.stdout
    run_dir = script.parent
    assert (run_dir / "attempts" / "1" / "ranks" / "rank-0.error").read_text().startswith("rank 0 (n1): RuntimeError")
    assert (run_dir / "starts").read_text() == "2"


@pytest.mark.parametrize(("restarts", "attempts"), [(0, 1), (1, 2)])
def test_the_last_attempts_exit_code_is_the_jobs(tmp_path: Path, restarts: int, attempts: int) -> None:
    script = _job(tmp_path, "import sys, pathlib\np = pathlib.Path('starts')\n"
                            "p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))\nsys.exit(7)\n", restarts)
    done = _run(script)
    assert done.returncode == 7 and (script.parent / "starts").read_text() == str(attempts), done.stdout + done.stderr


@pytest.mark.parametrize("code", [2, 3])
def test_bad_input_or_a_checkpointed_stop_is_not_restarted(tmp_path: Path, code: int) -> None:
    """Exit code 2: bad data or arguments, the same again on every attempt; 3: the program saved a
    checkpoint on Slurm's warning and stopped (docs/generated-program.md, exit codes). The job ends."""
    script = _job(tmp_path, f"import pathlib, sys\npathlib.Path('started').touch()\nsys.exit({code})\n", restarts=2)
    done = _run(script)
    assert done.returncode == code and done.stdout.count("flowtrain: attempt ") == 1, done.stdout


def test_a_cancelled_job_is_not_restarted(tmp_path: Path) -> None:
    """scancel signals the batch shell (SIGTERM): the shell passes it on to the step and ends."""
    script = _job(tmp_path, "import pathlib, time\npathlib.Path('started').touch()\n"
                            "while True:\n    time.sleep(0.1)\n", restarts=2)
    shell = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: (script.parent / "started").exists(), timeout=60, message="the program to start")
        shell.send_signal(signal.SIGTERM)
        out, _ = shell.communicate(timeout=60)
    finally:
        if shell.poll() is None:
            shell.kill()
    assert shell.returncode == 128 + signal.SIGTERM, out
    assert out.count("flowtrain: attempt ") == 1, out


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_a_multi_node_job_runs_each_attempt_as_its_own_srun_step(framework: str, tmp_path: Path) -> None:
    """With restarts the launch line runs in the background of the loop (no exec: the shell must
    live on to start the next attempt); without, it is exec'd as before, after the node list."""
    looped = render_sbatch(JobRequest(run_dir=tmp_path, name="r", framework=framework,
                                      resources=Resources(nodes=2), restarts=2), python="/env/py")
    assert subprocess.run(["bash", "-n"], input=looped, text=True).returncode == 0
    steps = [ln.strip() for ln in looped.splitlines() if "srun --export=ALL --kill-on-bad-exit=1" in ln]
    assert len(steps) == 1 and steps[0].startswith("srun ") and steps[0].endswith(" </dev/null &"), steps
    assert 'echo "flowtrain: attempt $attempt of 3 on ' in looped
    plain = render_sbatch(JobRequest(run_dir=tmp_path, name="r", framework=framework,
                                     resources=Resources(nodes=2)), python="/env/py")
    assert [ln for ln in plain.splitlines() if ln.startswith("exec srun ")] and "for attempt" not in plain
    assert 'echo "flowtrain: attempt 1 of 1 on $(scontrol show hostnames' in plain


@pytest.mark.parametrize("bad", [-1, 101, True, "2"])
def test_a_restart_budget_that_is_not_a_small_count_is_refused(bad: object, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="restarts must be an integer from 0 to 100"):
        render_sbatch(JobRequest(run_dir=tmp_path, name="r", framework="torch", restarts=bad),  # type: ignore[arg-type]
                      python="p")


@pytest.mark.frameworks
def test_a_local_run_says_that_it_does_not_restart(tmp_path: Path) -> None:
    """training.restarts is for Slurm allocations: a local run with it set says so in its history
    instead of dropping it silently (this one fails at once on its missing data: exit code 2)."""
    home = tmp_path / "home"
    env = cli_env(home, tmp_path)
    spec = small_spec(tmp_path, source=str(tmp_path / "missing.npz"), format="npz", input_shape=[1, 28, 28],
                      num_classes=10)
    doc = json.loads(spec.read_text())
    doc["training"]["restarts"] = 1
    spec.write_text(json.dumps(doc))
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait")
    assert out.returncode == 1 and "FAILED (exit code 2)" in out.stdout, out.stdout + out.stderr
    [run] = RunRegistry(home=home).list_runs(ME)
    notes = [h.detail for h in RunRegistry(home=home).history(run.id)]
    assert "training.restarts = 1 applies to Slurm runs only: this local run does not restart" in notes, notes
    shown = flowtrain(env, "status", run.id).stdout
    assert "restarts" not in shown.split("\n", 2)[1], shown  # the state line: no restart budget locally


# A program that counts its starts, writes `line` as rank 0's error file and exits 1, as torchrun
# reports any failed worker (the bad input's exit code 2 included).
RAISES = """\
import pathlib, sys
starts = pathlib.Path("starts"); starts.write_text(str(int(starts.read_text()) + 1 if starts.exists() else 1))
pathlib.Path("ranks").mkdir(exist_ok=True)
pathlib.Path("ranks/rank-0.error").write_text({line!r})
sys.exit(1)
"""


@pytest.mark.parametrize(("line", "code", "why"), [
    ("rank 0 (n1): ValueError: shapes (3,) and (4,) do not match\n", 1,
     "every rank raised an error of its own, which a restart would raise again"),
    ("rank 0 (n1): DataError: data.csv row 7: 'x' is not a number; fix the file\n", 2,
     "bad input, the same on every attempt"),
    ("rank 0 (n1): OSError: [Errno 28] No space left on device\n", 1,
     "the file system refused a write (errno 28), as it would again"),
])
def test_a_failure_that_every_attempt_would_repeat_is_not_restarted(tmp_path: Path, line: str, code: int,
                                                                    why: str) -> None:
    """An error every rank raised (here the one rank) or bad data ends the job after its first attempt
    with the ranks' own reason, not after the whole budget of attempts that fail the same way."""
    script = _job(tmp_path, RAISES.format(line=line), restarts=2)
    done = _run(script)
    assert done.returncode == code and (script.parent / "starts").read_text() == "1", done.stdout + done.stderr
    assert f"flowtrain: not restarted: {why}" in done.stdout.splitlines(), done.stdout
    assert failure_reason(script.parent, done.stdout, "torch", Layout(1, 1)) == f"{line.strip()}; not restarted: {why}"


def _requeued(tmp_path: Path, restarts: int, started: int | None,
              restart_count: str = "1") -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The job script run as Slurm runs a requeued job: SLURM_RESTART_COUNT=1 and, with restarts, the
    attempt it began before (``started``) on record, its error file left behind."""
    script = _job(tmp_path, "import pathlib\np = pathlib.Path('starts')\n"
                            "p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))\n", restarts)
    (script.parent / "ranks").mkdir()
    (script.parent / "ranks" / "rank-0.error").write_text("rank 0 (n2): RuntimeError: Connection closed by peer\n")
    if started is not None:
        (script.parent / "attempts").mkdir()
        (script.parent / "attempts" / "job-77.started").write_text(f"{started}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_JOB_ID="77", SLURM_RESTART_COUNT=restart_count)
    return script.parent, subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120, env=env)


def test_a_requeued_job_goes_on_with_the_next_attempt_of_its_budget(tmp_path: Path) -> None:
    """A node failed under attempt 1 and Slurm requeued the job: the script starts attempt 2 of 3 (not
    1 of 3 again), attempt 1's error files kept apart, and the history says why it restarted."""
    run_dir, done = _requeued(tmp_path, restarts=2, started=1)
    assert done.returncode == 0 and (run_dir / "starts").read_text() == "1", done.stdout + done.stderr
    said = [re.sub(r" on \S*$", "", ln) for ln in done.stdout.splitlines() if ln.startswith("flowtrain: ")]
    assert said[0].startswith("flowtrain: attempt 1 ended with its allocation: Slurm requeued the job (restart count 1)")
    assert said[1:] == ["flowtrain: attempt 2 of 3"], done.stdout
    assert (run_dir / "attempts" / "1" / "ranks" / "rank-0.error").is_file()
    log = "flowtrain: attempt 1 of 3 on n1,n2\nsrun: error: Node failure on n2\n" + done.stdout + "training on cpu x2:\n"
    assert restart_events(run_dir, log, "torch", Layout(2, 1), recorded=0, final=True) == [
        "restart 1 of 2: node n2 failed: Slurm requeued the job; started again from step 0 (no checkpoint yet)"]


def test_a_job_started_again_by_a_restarted_controller_says_so(tmp_path: Path) -> None:
    """slurmctld restarted before it saved a job's start: Slurm runs the job again with restart count 0.
    The script goes on with attempt 2 of the budget and says what happened, not "requeued (restart count 0)"."""
    run_dir, done = _requeued(tmp_path, restarts=2, started=1, restart_count="0")
    assert done.returncode == 0 and (run_dir / "starts").read_text() == "1", done.stdout + done.stderr
    said = [re.sub(r" on \S*$", "", ln) for ln in done.stdout.splitlines() if ln.startswith("flowtrain: ")]
    assert said == ["flowtrain: attempt 1 ended with its allocation: Slurm started the job again "
                    "(its restarted controller had lost the first start)", "flowtrain: attempt 2 of 3"], done.stdout
    log = "flowtrain: attempt 1 of 3 on n1,n2\n" + done.stdout + "training on cpu x2:\n"
    assert restart_events(run_dir, log, "torch", Layout(2, 1), recorded=0, final=True) == [
        "restart 1 of 2: Slurm started the job again; started again from step 0 (no checkpoint yet)"]


@pytest.mark.parametrize(("restarts", "started", "why"), [
    (2, 3, "no restart left (training.restarts = 2)"),
    (0, None, "training.restarts = 0"),
])
def test_a_job_requeued_without_a_restart_left_ends_at_once(tmp_path: Path, restarts: int, started: int | None,
                                                           why: str) -> None:
    """A node that never comes back (or a budget of 0): the requeued job does not train again; it
    fails at once, and its reason says which node failed and why nothing restarted."""
    run_dir, done = _requeued(tmp_path, restarts, started)
    assert done.returncode == 1 and not (run_dir / "starts").exists(), done.stdout + done.stderr
    marker = f"flowtrain: attempt {started or 1} of {restarts + 1} on n1,n2\n"
    log = marker + "srun: error: Node failure on n2\n" + done.stdout
    assert failure_reason(run_dir, log, "torch", Layout(2, 1)) == \
        f"node n2 failed: Slurm requeued the job; not restarted: {why}"


def test_a_checkpoint_folder_that_takes_no_files_stops_the_job_before_it_trains(tmp_path: Path) -> None:
    """Run as a user who may not write there (root may write anywhere): the job ends at once with
    exit code 2 and a reason naming the folder, instead of training until its first checkpoint fails."""
    shared = Path(tempfile.mkdtemp(prefix="flowtrain-ro-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        script = _job(shared, "import pathlib\npathlib.Path('started').touch()\n", restarts=2)
        (script.parent / "checkpoints").mkdir(mode=0o555)
        script.parent.chmod(0o755)
        script.chmod(0o644)
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", str(script)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and not (script.parent / "started").exists(), done.stdout + done.stderr
        assert failure_reason(script.parent, done.stdout, "torch") == (
            f"not started: the checkpoint folder {script.parent}/checkpoints is not writable; fix its permissions "
            "or free space, then run again")
    finally:
        shutil.rmtree(shared)


def test_jobs_with_neighbouring_ids_get_port_blocks_that_do_not_overlap(tmp_path: Path) -> None:
    """Keras gives rank R the port MASTER_PORT + 1 + R: each job owns 64 ports, so a keras job's workers
    never take the rendezvous port of the next jobs on a shared node (paddle's launcher then waited
    for a master that was never started)."""
    text = render_sbatch(JobRequest(run_dir=tmp_path, name="r", framework="keras", resources=Resources(nodes=2)),
                         python="/env/py")
    [line] = [ln for ln in text.splitlines() if ln.startswith("export MASTER_PORT=")]

    ids = [17, 18, 19, 638, 639]
    loop = f"for SLURM_JOB_ID in {' '.join(map(str, ids))}; do {line}; echo $MASTER_PORT; done"
    ports = dict(zip(ids, map(int, subprocess.run(["bash", "-c", loop], capture_output=True, text=True,
                                                  check=True).stdout.split()), strict=True))
    assert ports[18] - ports[17] >= 64 and ports[19] - ports[18] >= 64 and ports[639] - ports[638] >= 64, ports
    assert min(ports.values()) > 1024 and ports[639] + 64 <= 65536, ports
