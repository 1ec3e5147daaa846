"""Estimates that hold when the machine's load changes: a calibration measured under one load, a run starting
under another (schedulers/contention.py).

The slowdown model is checked on the step times bench/load_slowdown.py recorded (tests/schedulers/data/
load_slowdown.json); the cache is real SQLite under a temporary home; the selector is given the local machine's
utilisation with a stated load, so that each factor can be checked exactly. That a real local calibration job
records the load it ran under: tests/schedulers/test_calibration.py::test_local_calibration_jobs_decide_auto.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import statistics
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.load import spec_from_dict
from core.validate import validate
from schedulers.base import Resources
from schedulers.contention import MODEL_FACTOR, Contention, during, here, load_factor, slowdown
from schedulers.selector import select
from schedulers.speed import (
    Measurement,
    SpeedBook,
    SpeedCache,
    speed_key,
    train_acts_per_sample,
    train_conv_macs_per_sample,
    train_macs_per_sample,
)
from schedulers.utilisation import PartitionUtilisation, local_utilisation
from tests.schedulers.completed_runs import TIMINGS, complete
from tests.schedulers.test_selector import all_supported, env_report
from tests.schedulers.test_speed import NOW, mnist

DATA = Path(__file__).parent / "data" / "load_slowdown.json"
REPORTS = [env_report("all", (), torch="2.13.0", keras="3.15.1", paddle="3.3.1")]


def local(load: float, cpus: int = 2) -> dict[str, PartitionUtilisation]:
    """This machine as the local partition, its load average stated (the estimate reads it from here)."""
    util = local_utilisation(gpus=0)
    return {"local": replace(util, contention=Contention(load, cpus, cpus))}


def measure(cache: SpeedCache, util: PartitionUtilisation, framework: str, *, step_s: float,
            contention: Contention | None, val_s: float = 0.5, batch_size: int = 64) -> Measurement:
    """What a local calibration job of the MNIST CNN (at ``batch_size``) would leave in the cache, measured under
    ``contention``."""
    doc = mnist().model_dump(mode="json")
    doc["data"]["batch_size"] = batch_size
    spec = spec_from_dict(doc)
    analysis = validate(spec)
    key = speed_key(spec, analysis, framework, "all", "/opt/all/bin/python", None, util.hardware,
                    Resources(cpus_per_task=spec.training.resources.cpus_per_task, time_limit_min=30))
    m = Measurement(key, framework, {"torch": "2.13.0", "keras": "3.15.1", "paddle": "3.3.1"}[framework], "all",
                    "local", util.hardware, "local", "20261202-1", NOW - 60, batch_size / step_s, step_s, 2.0, 1437,
                    train_macs_per_sample(analysis), {"samples_per_s": batch_size / step_s}, launch_s=4.0, warmup_s=3 * step_s,
                    val_s=val_s, val_samples=360, checkpoint_s=0.1, end_s=1.0, contention=contention,
                    params=analysis.total_params, batch_size=batch_size,
                    conv_macs_per_sample=train_conv_macs_per_sample(analysis),
                    acts_per_sample=train_acts_per_sample(analysis))
    cache.put(m)
    return m


def choose(cache: SpeedCache, util: dict[str, PartitionUtilisation], now: float | None = NOW) -> Any:
    spec = mnist()
    return select(spec, validate(spec), REPORTS, util, scheduler="local", support=all_supported,
                  speeds=SpeedBook(cache, now=now), require="torch").candidates[0]


def pair_errors(rows: list[dict[str, Any]], figure: str, scaled: bool) -> list[float]:
    """For every ordered pair of recorded jobs, |log(predicted / measured)| of ``figure`` predicted for one from
    the other's, scaled by the load (``scaled``) or as it is."""
    errors = []
    for then in rows:
        for now in rows:
            if now is not then:
                factor = load_factor(Contention(now["load"], now["cpus"], now["threads"]),
                                     Contention(then["load"], then["cpus"], then["threads"])) if scaled else 1.0
                errors.append(abs(math.log(then[figure] * factor / now[figure])))
    return errors


def test_the_slowdown_model_predicts_step_times_measured_under_other_loads() -> None:
    """bench/load_slowdown.py's 11 calibration jobs of one graph (torch, the MNIST CNN), each beside another load
    (busy loops beside the machine's other work, 1.2 to 22 other runnable tasks on 2 CPUs): a step time predicted
    from any other job's, scaled by the load, is within the model's stated uncertainty of the one measured (the
    root mean square of the log ratio), never more than 1.4x off, where unscaled it is up to 5.7x; the start-up
    (the imports, the data, the model) is nearer scaled too."""
    rows = json.loads(DATA.read_text())["rows"]
    assert len(rows) >= 11 and max(r["load"] for r in rows) > 10 * min(r["load"] for r in rows)
    for r in rows:
        r["start_s"] = r["startup_s"] + r["launch_s"]
    scaled, unscaled = pair_errors(rows, "step_s", True), pair_errors(rows, "step_s", False)
    rms = math.sqrt(statistics.fmean(e * e for e in scaled))
    assert rms <= math.log(MODEL_FACTOR) and max(scaled) < math.log(1.4), (rms, max(scaled))
    assert max(unscaled) > math.log(3) and rms < math.sqrt(statistics.fmean(e * e for e in unscaled)) / 3
    start, start_unscaled = pair_errors(rows, "start_s", True), pair_errors(rows, "start_s", False)
    assert statistics.fmean(e * e for e in start) < statistics.fmean(e * e for e in start_unscaled) / 2


def test_the_model_is_one_thread_per_core_beyond_the_cores() -> None:
    assert slowdown(0.0, 2, 2) == 1.0 and slowdown(0.5, 1, 2) == 1.0  # spare cores: no slowdown
    assert slowdown(2.0, 2, 2) == pytest.approx(2.0) and slowdown(6.0, 2, 4) == pytest.approx(2.0)
    then, now = Contention(0.4, 2, 2), Contention(3.1, 2, 2)
    assert load_factor(now, then) == pytest.approx(5.1 / 2.4)
    assert load_factor(then, now) == pytest.approx(2.4 / 5.1)  # a quieter machine now: the run is faster
    assert load_factor(Contention(0.45, 2, 2), then) == 1.0  # within 5%: the load average's own noise
    assert load_factor(None, then) == load_factor(now, None) == 1.0


def test_the_load_a_job_ran_under_leaves_out_the_job_itself() -> None:
    """Before a 60 s job of 2 threads 1.0, after it 3.0: the average took in 2 x (1 - 1/e) = 1.26 of the job's
    own; the load beside it is the mean of 1.0 and 3.0 - 1.26. With the runnable tasks read while it ran, those
    (the load average lags a minute)."""
    c = during(Contention(1.0, 2, 2), 3.0, 60.0)
    assert c.load == pytest.approx((1.0 + 3.0 - 2 * (1 - math.exp(-1))) / 2)
    assert (c.load_before, c.load_end, c.cpus, c.threads) == (1.0, 3.0, 2, 2)
    assert during(Contention(0.2, 2, 2), 0.5, 600.0).load == pytest.approx(0.1)  # never below nothing
    # the runnable tasks read while it ran, where there are enough: their mean less the reader and the job's threads
    seen = during(Contention(14.3, 2, 2), 9.2, 100.0, [7, 6, 6, 5, 5])
    assert seen.load == pytest.approx(5.8 - 3) and seen.runnable == pytest.approx(5.8) and seen.load_before == 14.3
    assert during(Contention(1.0, 2, 2), 3.0, 60.0, [9, 9]).load == c.load  # too few: the load average


@pytest.mark.alone
def test_the_load_now_counts_what_runs_now_not_the_last_minute() -> None:
    """Two busy processes are two more runnable tasks now, and nothing once they are gone, whatever the 1-minute
    load average still holds of them: an estimate taken right after a calibration job ended was scaled up by the
    job's own lingering load (docs/selector.md, "Load"). Real processes, the real /proc/stat."""
    base = here().load
    loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]  # running within a millisecond
    try:
        busy = here(samples=20).load
    finally:
        for proc in loops:
            proc.kill()
            proc.wait()
    after = here(samples=20)
    assert busy - base >= 1.25, (base, busy)
    assert busy - after.load >= 1.25, (base, busy, after)  # gone at once, not a minute later
    assert after.load_before == pytest.approx(os.getloadavg()[0], abs=0.5)  # the load average, kept beside it


def test_a_measurement_keeps_the_load_it_was_measured_under(tmp_path: Path) -> None:
    util = local(0.4)["local"]
    cache = SpeedCache(tmp_path)
    m = measure(cache, util, "torch", step_s=0.05, contention=Contention(0.4, 2, 2, load_before=0.2, load_end=1.3))
    [back] = cache.all()
    assert back.contention == Contention(0.4, 2, 2, load_before=0.2, load_end=1.3) and back == replace(m, user=back.user)


def test_the_estimate_scales_start_up_training_and_validation_by_the_load_now_and_says_so(tmp_path: Path) -> None:
    """Calibrated beside a load of 0.4 on 2 CPUs, estimated at 3.1: the start-up, training and validation (the
    program's 2 threads) take (3.1 + 2) / (0.4 + 2) = 2.1 times as long, their uncertainty widens by the model's,
    and the reason says it. Checkpoints and the end are writes, not compute, and keep their measured figures."""
    cache = SpeedCache(tmp_path)
    quiet = local(0.4)
    measure(cache, quiet["local"], "torch", step_s=0.05, contention=Contention(0.4, 2, 2))
    same, busy = choose(cache, quiet), choose(cache, local(3.1))
    e0, e1 = same.estimate, busy.estimate
    assert e0["load"]["factor"] == 1.0 and "load 0.4 now vs 0.4 at calibration (2 CPUs): no change" in same.reason
    for part in ("startup_s", "train_s", "val_s"):
        assert e1[part] == pytest.approx(e0[part] * 5.1 / 2.4), part
    assert (e1["checkpoint_s"], e1["end_s"]) == (e0["checkpoint_s"], e0["end_s"])
    assert e1["sources"]["train"] == "measured, ×2.1 for the load"
    assert "load 3.1 now vs 0.4 at calibration (2 CPUs): start-up, training and validation ×2.1" in busy.reason
    assert (busy.high_s - busy.finish_s) / busy.finish_s > (same.high_s - same.finish_s) / same.finish_s
    assert busy.samples_per_s == same.samples_per_s  # the measured rate is shown as measured
    assert busy.rank == 1 and busy.finish_s > same.finish_s * 2


def test_the_learned_model_stands_for_an_idle_machine_and_is_scaled_to_the_load_now(tmp_path: Path) -> None:
    """Three other graphs (the MNIST CNN at batch 16, 32, 128) calibrated beside a load of 2 on 2 CPUs, each step
    twice what it is alone: a graph never measured gets the same estimate from them as from the same graphs
    calibrated on an idle machine, and twice its start-up, training and validation at a load of 2 now. Before,
    the learned model took loaded steps as they were, and a fresh home's shipped defaults were one loaded machine's
    figures for every load: a quiet machine's runs came out 2.5-30x over (docs/selector.md)."""
    estimates = {}
    for label, load in (("idle", 0.0), ("loaded", 2.0)):
        cache = SpeedCache(tmp_path / label)
        slow = slowdown(load, 2, 2)
        for batch, step_s in ((16, 0.02), (32, 0.035), (128, 0.125)):
            m = measure(cache, local(load)["local"], "torch", step_s=step_s * slow, contention=Contention(load, 2, 2),
                        batch_size=batch, val_s=0.5 * slow)
            cache.put(replace(m, launch_s=m.launch_s * slow, startup_s=m.startup_s * slow))
        estimates[label] = {now: choose(cache, local(now)) for now in (0.0, 2.0)}
    quiet, busy = estimates["idle"][0.0], estimates["loaded"][2.0]
    assert quiet.speed_source == "model" and "fitted to 3 other graph(s)" in quiet.speed_note
    for part in ("startup_s", "train_s", "val_s", "checkpoint_s", "end_s"):
        assert estimates["loaded"][0.0].estimate[part] == pytest.approx(quiet.estimate[part], rel=1e-6), part
    for part in ("startup_s", "train_s", "val_s"):
        assert busy.estimate[part] == pytest.approx(2 * quiet.estimate[part], rel=1e-6), part
        assert estimates["idle"][2.0].estimate[part] == pytest.approx(busy.estimate[part], rel=1e-6), part
    assert busy.estimate["sources"]["train"] == "MACs model, ×2 for the load"
    assert "load 2.0 now vs 0.0 for the model's figures (an idle machine's) (2 CPUs)" in busy.reason, busy.reason


def test_a_cache_row_from_before_loads_were_recorded_still_reads(tmp_path: Path) -> None:
    """A row written before this change (its terms without a load) reads, and is used unscaled: the load it was
    measured under is not known, and the reason says nothing of a load."""
    util = local(0.4)["local"]
    cache = SpeedCache(tmp_path)
    new = measure(cache, util, "torch", step_s=0.05, contention=Contention(0.4, 2, 2))
    with sqlite3.connect(tmp_path / "calibration.db") as conn:  # the row as the code before this change wrote it
        terms = json.loads(conn.execute("SELECT terms FROM measurements").fetchone()[0])
        del terms["contention"]
        conn.execute("UPDATE measurements SET terms = ?", (json.dumps(terms),))
    conn.close()
    [old] = cache.all()
    assert old.contention is None and old == replace(new, contention=None, user=old.user)
    c = choose(cache, local(3.1))
    assert c.speed_source == "measured" and "load" not in c.reason.split("wait none")[1]
    assert c.estimate["load"] == {"contention": Contention(3.1, 2, 2).to_dict()}  # the load now, for the record
    assert c.estimate["sources"]["train"] == "measured"


def test_a_completed_run_teaches_the_load_it_was_submitted_under(tmp_path: Path) -> None:
    """A local run submitted at a load of 3.1 completes; the cache's figures from it keep that load, so the next
    estimate at 3.1 uses them as they are, and one at 0.4 scales them down."""
    from schedulers.learning import learn_from_run
    from schedulers.registry.runs import RunRegistry

    home = tmp_path / "home"
    registry, cache = RunRegistry(home=home), SpeedCache(home, "alice")
    busy = local(3.1)
    spec = mnist()
    measure(cache, busy["local"], "torch", step_s=0.05, contention=Contention(0.4, 2, 2))
    before = select(spec, validate(spec), REPORTS, busy, scheduler="local", support=all_supported,
                    speeds=SpeedBook(cache, now=NOW), require="torch")
    run = registry.create_run(user="alice", spec_json=spec.to_json(), spec_hash=spec.spec_hash(), framework="torch",
                              scheduler="local", partition="local", selection=before.to_dict())
    registry.mark_submitted(run.id, "7")
    submitted = registry.get(run.id).submitted
    complete(registry, run, "7", {"status": "completed", "framework": "torch", "steps": 276, "epochs": 12,
                                  "elapsed": 28.2, "timings": TIMINGS}, started=submitted + 1.0, ended=submitted + 33.2)
    learned = learn_from_run(registry, run.id)
    assert learned is not None and learned.contention == Contention(3.1, 2, 2)
    assert cache.get(learned.key) == replace(learned, user="alice")
    same = choose(cache, busy, now=None)  # the run's figures are of the clock's now
    assert same.estimate["train_s"] == pytest.approx(20.0) and f"load 3.1 now vs 3.1 in run {run.id}" in same.reason
    quiet = choose(cache, local(0.4), now=None)
    assert quiet.estimate["train_s"] == pytest.approx(20.0 * 2.4 / 5.1)


def test_a_slurm_candidate_is_not_scaled(tmp_path: Path) -> None:
    """A Slurm job's CPUs are its own: whatever load a measurement of those nodes carries, its estimate is the
    measured one, and says nothing of a load."""
    from tests.schedulers.test_speed import HW, idle, record
    from tests.schedulers.test_speed import choose as choose_on_slurm

    cache = SpeedCache(tmp_path)
    record(cache, mnist(), "torch", 1437.0, hardware=HW, contention=Contention(0.4, 8, 8))
    c = next(c for c in choose_on_slurm(mnist(), idle(), cache).candidates if c.framework == "torch")
    assert c.speed_source == "measured" and c.estimate["load"] == {} and "load" not in c.reason.split("wait")[-1]
    assert c.estimate["train_s"] == pytest.approx(12 * 1437 / 1437.0)
