"""The job script's restarts within the allocation (training.restarts, schedulers/restarts.py), run for
real with bash: a one-process job's script runs its launch line directly, so its loop is the one a
multi-node job runs around srun. The multi-node runs on the dev cluster are in tests/cli/test_restarts.py."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from schedulers.base import JobRequest, Resources
from schedulers.registry.runs import RunRegistry
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
    (ranks / "rank-0.error").write_text("rank 0 (n1): RuntimeError: first attempt\\n")
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
