"""Calibration jobs for real: the MNIST CNN's generated programs time a few steps (``--calibrate``)
through the local executor and on the dev Slurm cluster, and ``auto`` then picks by those figures.

Nothing assumes which framework is fastest (the machine is shared and its load varies): the tests
assert that the choice is the best of the figures the selector itself reports, that those figures
came from calibration jobs of the executor, and how the choice moves when a partition is busy.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import zoo
from schedulers.registry.runs import RunRegistry
from tests.helpers import wait_until
from tests.slurm_fixture import TEST_JOB_PREFIX, DevCluster

REPO = Path(__file__).resolve().parents[2]
STEPS = 8  # timed steps per calibration (after 3 warm-up ones)


def spec_file(tmp_path: Path) -> Path:
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    doc["training"]["epochs"] = 2
    doc["training"]["resources"]["cpus_per_task"] = 1
    doc["data"]["num_workers"] = 0
    path = tmp_path / "mnist.json"
    path.write_text(json.dumps(doc))
    return path


def cli_env(tmp_path: Path, frameworks: tuple[str, ...] = ("torch", "keras", "paddle"), **extra: str) -> dict[str, str]:
    """Its own home, this venv as the one environment (frameworks as declared: no probe), a settings
    file with short calibrations."""
    config = tmp_path / "flowtrain.toml"
    config.write_text(f"[selector]\nsteps = {STEPS}\nwindow_s = 0\ntime_limit_min = 5\nqueue_wait_s = 300\n", encoding="utf-8")
    versions = {"torch": "2", "keras": "3", "paddle": "3"}
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({"environments": [
        {"name": "venv", "python": sys.executable, "frameworks": {fw: {"version": versions[fw]} for fw in frameworks}}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWTRAIN_", "SLURM_"))}
    env.update(FLOWTRAIN_HOME=str(tmp_path / "home"), FLOWTRAIN_ENVIRONMENTS=str(envs), FLOWTRAIN_CONFIG=str(config),
               **extra)
    return env


def flowtrain(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def calibrate(env: dict[str, str], spec: Path, scheduler: str) -> dict[str, Any]:
    out = flowtrain(env, "calibrate", str(spec), "--scheduler", scheduler, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def select(env: dict[str, str], spec: Path, scheduler: str, *extra: str) -> dict[str, Any]:
    out = flowtrain(env, "select", str(spec), "--scheduler", scheduler, "--json", *extra)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def measured(selection: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(framework, partition) → candidate, for the feasible ones; each must have a measured speed."""
    feasible = {(c["framework"], c["partition"]): c for c in selection["candidates"] if c["feasible"]}
    assert feasible and all(c["speed_source"] == "measured" for c in feasible.values()), selection["reasons"]
    return feasible


def check_picks_the_fastest(selection: dict[str, Any]) -> str:
    """The chosen framework is the one with the soonest estimated time to result (start-up, measured steps,
    validation, end: issue 26's whole run, not samples/s alone), or one whose estimate is within the soonest
    one's uncertainty, which the reason then says (the spec's preference or the nearest estimate decides);
    returns it."""
    feasible = measured(selection)
    soonest = min(feasible.values(), key=lambda c: c["finish_s"])
    chosen = feasible[selection["framework"], selection["partition"]]
    if chosen["framework"] != soonest["framework"]:
        reason = selection["reasons"][0]
        assert "finish within the estimates' uncertainty" in reason and chosen["framework"] in reason \
            and soonest["framework"] in reason.split("finish within")[0], selection["reasons"]
    figures = "; ".join(f"{fw} on {p}: {c['samples_per_s']:,.0f}" for (fw, p), c in feasible.items())
    assert selection["reasons"][1].startswith("time to result: "), selection["reasons"]
    assert f"{chosen['framework']} on {selection['partition']}: {chosen['samples_per_s']:,.0f} samples/s measured" \
        in selection["reasons"][1], figures
    return str(chosen["framework"])


@pytest.mark.frameworks
@pytest.mark.slow
@pytest.mark.alone
def test_local_calibration_jobs_decide_auto(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    spec = spec_file(tmp_path)
    doc = calibrate(env, spec, "local")
    results = doc["calibrations"]
    assert sorted(r["framework"] for r in results) == ["keras", "paddle", "torch"]
    assert all(r["outcome"] == "measured" and r["samples_per_s"] > 0 for r in results), results
    home = tmp_path / "home"
    for r in results:  # each a job of the local executor, in the calibration folder, never a run
        record = json.loads((home / "local" / "jobs" / f"{r['job_id']}.json").read_text())
        assert record["name"] == "ft-calibrate-mnist_cnn" and record["args"] == ["--calibrate", str(STEPS)]
        result = json.loads((Path(record["run_dir"]) / "calibration.json").read_text())
        assert result["framework"] == r["framework"] and result["steps"] == STEPS
        assert result["samples_per_s"] == pytest.approx(r["samples_per_s"])
    assert RunRegistry(home=home).list_runs(None) == []
    assert json.loads(flowtrain(env, "runs", "--json").stdout) == []

    fastest = check_picks_the_fastest(doc["selection"])
    again = select(env, spec, "local")  # from the cache: no job this time
    assert check_picks_the_fastest(again) == fastest
    cached = json.loads(flowtrain(env, "speeds", "--json").stdout)
    assert len(cached) == 3
    for m in cached:  # each keeps the load it was measured under, read around its job on this machine
        c = m["contention"]
        assert c["cpus"] == os.cpu_count() and 1 <= c["threads"] <= c["cpus"], m
        assert c["load"] >= 0 and c["load_end"] >= 0, m
    slowest = min(measured(again).values(), key=lambda c: c["samples_per_s"])["framework"]
    assert select(env, spec, "local", "--framework", slowest)["framework"] == slowest  # --framework still wins

    # Calibrated again only with --force; the cached measurements are kept otherwise.
    kept = calibrate(env, spec, "local")["calibrations"]
    assert [r["outcome"] for r in kept] == ["cached"] * 3


@pytest.mark.frameworks
@pytest.mark.slow
def test_run_calibrates_first_when_the_setting_asks(tmp_path: Path) -> None:
    """FLOWTRAIN_CALIBRATE=missing: `run` measures torch (the only framework here) before choosing.
    (torch: the setting does not depend on the framework, and torch starts in a fraction of TensorFlow's
    time, twice here; every framework's calibration job is the test above.)"""
    env = cli_env(tmp_path, frameworks=("torch",), FLOWTRAIN_CALIBRATE="missing")
    spec = spec_file(tmp_path)
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait", "--max-steps", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "calibrating torch on local" in out.stdout
    assert "time to result: torch on local: " in out.stdout and "samples/s measured" in out.stdout
    [run] = RunRegistry(home=tmp_path / "home").list_runs(None)  # the calibration job is not a run
    assert run.framework == "torch" and run.selection["candidates"][0]["speed_source"] == "measured"


# --------------------------------------------------------------------------- the real cluster


@pytest.fixture
def fill(slurm_cluster: DevCluster) -> Iterator[Any]:
    """Fill a partition: on each of its nodes a sleeping job takes every CPU still idle (other jobs
    may share the dev cluster, so whole-node jobs could wait behind them); cancelled at the end."""
    cmds = slurm_cluster.commands
    jobs: list[str] = []

    def hold(partition: str, minutes: int) -> list[str]:
        mine = []
        for node in cmds.nodes():
            idle = node.cpus - node.alloc_cpus
            if partition not in node.partitions or not node.available or idle <= 0:
                continue
            out = cmds.run(["sbatch", "--parsable", f"--job-name={TEST_JOB_PREFIX}-fill-{node.name}", "-p", partition,
                            f"--nodelist={node.name}", "-N1", "-n1", f"-c{idle}", "--mem=100", "-t", str(minutes),
                            "-o", "/dev/null", "--wrap", f"sleep {minutes * 60}"], clean_job_env=True).stdout
            mine.append(out.strip().split(";")[0])
        jobs.extend(mine)
        wait_until(lambda: all((j := cmds.show_job(job_id)) is not None and j.state.value == "RUNNING"
                               for job_id in mine), timeout=120,
                   message=lambda: f"the filling jobs {mine} to run: "
                   + cmds.run(["squeue", "-o", "%i %P %j %T %R %C %N"]).stdout)
        return mine

    try:
        yield hold
    finally:
        for job_id in jobs:
            cmds.scancel(job_id)


@pytest.mark.slurm
@pytest.mark.frameworks
@pytest.mark.slow
@pytest.mark.alone
def test_slurm_calibration_picks_the_measured_fastest_and_moves_when_busy(
        tmp_path: Path, slurm_cluster: DevCluster, fill: Any) -> None:
    """Idle: `auto` takes the measured fastest, measured by Slurm jobs (partitions cpu and gpu share
    their kind of node, so one job per framework serves both). Every CPU of partition cpu (n1, n2)
    held for 30 min: the choice moves to gpu, where it finishes soonest. `--framework` still wins."""
    env = cli_env(tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    spec = spec_file(tmp_path)
    doc = calibrate(env, spec, "slurm")
    results = doc["calibrations"]
    jobs = {r["job_id"] for r in results if r["outcome"] == "measured"}
    assert len(jobs) == 3 and all(r["outcome"] == "measured" or "its measurement is shared" in r["detail"]
                                  for r in results), results
    for job_id in jobs:  # Slurm ran them, under the calibration name
        job = slurm_cluster.commands.show_job(job_id) or slurm_cluster.commands.sacct_job(job_id)
        assert job is not None and job.name == "ft-calibrate-mnist_cnn" and job.state.value == "COMPLETED"
    assert json.loads(flowtrain(env, "runs", "--json").stdout) == []

    idle = select(env, spec, "slurm")
    fastest = check_picks_the_fastest(idle)
    assert idle["candidates"][0]["can_start_now"] and idle["candidates"][0]["wait_s"] == 0

    fill("cpu", 30)
    busy = select(env, spec, "slurm")
    feasible = measured(busy)
    assert (busy["framework"], busy["partition"]) == (fastest, "gpu"), busy["reasons"]
    soonest = min(feasible.values(), key=lambda c: c["finish_s"])
    assert (soonest["framework"], soonest["partition"]) == (fastest, "gpu")
    held = feasible[fastest, "cpu"]
    assert held["wait_s"] > 25 * 60 and not held["can_start_now"]
    assert re.search(r"done in ~\d+ min, .*wait (2[5-9]|[3-9]\d) min\)", held["reason"]), held["reason"]  # the wait, said

    slowest = min(feasible.values(), key=lambda c: c["samples_per_s"])["framework"]
    forced = select(env, spec, "slurm", "--framework", slowest)
    assert (forced["framework"], forced["partition"]) == (slowest, "gpu")


def test_a_calibration_times_enough_steps_to_last_its_window() -> None:
    """Fast steps are timed for about ``[selector] window_s`` by the estimate before calibration (ten keras
    steps of the MNIST CNN last 1.5 s, a sample of a moment's load), slow ones for the setting's steps; never
    more than MAX_STEPS; ``window_s = 0`` keeps the setting's steps."""
    from schedulers.calibration import MAX_STEPS, timed_steps

    def candidate(train_s: float, steps: int) -> dict[str, Any]:
        return {"train_s": train_s, "counts": {"steps": steps}}

    assert timed_steps(candidate(276 * 0.15, 276), 10, 10.0) == 67  # 10 s of 0.15 s steps
    assert timed_steps(candidate(276 * 2.0, 276), 10, 10.0) == 10  # 20 s already
    assert timed_steps(candidate(276 * 0.001, 276), 10, 10.0) == MAX_STEPS
    assert timed_steps(candidate(276 * 0.15, 276), 10, 0.0) == 10
    assert timed_steps(None, 10, 10.0) == 10  # no estimate: the setting's steps
