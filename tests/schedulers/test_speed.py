"""The selector's time to result: the speed cache (real SQLite under a home), staleness, the MACs
model, the expected start from the running jobs' end times, and the ranking and reasons they give.

The measurements here are written into the cache as a calibration job would write them, so that
each ranking rule is checked on exact numbers; tests/schedulers/test_calibration.py measures for
real (local executor and the dev Slurm cluster).
"""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from core import zoo
from core.load import spec_from_dict
from core.spec import PipelineSpec
from core.validate import validate
from schedulers.base import Resources
from schedulers.selector import UNKNOWN_WAIT_S, duration_words, select
from schedulers.shipped import SHIPPED
from schedulers.speed import (
    Measurement,
    SpeedBook,
    SpeedCache,
    planned_train_samples,
    speed_key,
    train_acts_per_sample,
    train_macs_per_sample,
)
from schedulers.utilisation import utilisation_from_outputs
from tests.schedulers.test_selector import all_supported, captured, env_report, partitions

NOW = 1_900_000_000.0
REPORTS = [env_report("all", (), torch="2.13.0", keras="3.15.1", paddle="3.3.1")]


def idle(now: float = NOW) -> dict[str, Any]:
    sinfo, _ = captured()
    sinfo = copy.deepcopy(sinfo)
    for n in sinfo["nodes"]:
        n.update(state="idle", state_flags=[], alloc_cpus=0, alloc_memory=0, gres_used="gpu:0", reason="")
    return utilisation_from_outputs(sinfo, {"jobs": []}, partitions(), now=now)


def cpu_partition_full(until: float, now: float = NOW) -> dict[str, Any]:
    """Every node idle except n1 and n2 (all of partition cpu), held by one running job until ``until``."""
    sinfo, _ = captured()
    sinfo = copy.deepcopy(sinfo)
    for n in sinfo["nodes"]:
        full = n["name"] in ("n1", "n2")
        n.update(state="allocated" if full else "idle", state_flags=[], alloc_cpus=8 if full else 0,
                 alloc_memory=16000 if full else 0, gres_used="gpu:4" if full else "gpu:0", reason="")
    job = {"job_id": 99, "name": "sleeper", "job_state": "RUNNING", "partition": "cpu", "start_time": int(now) - 60,
           "end_time": int(until), "nodes": "n[1-2]", "user_name": "x",
           "job_resources": {"allocated_nodes": [{"nodename": "n1"}, {"nodename": "n2"}]}}
    return utilisation_from_outputs(sinfo, {"jobs": [job]}, partitions(), now=now)


def mnist(framework: str = "auto", **training: Any) -> PipelineSpec:
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    doc["training"]["framework"] = framework
    doc["training"].update(training)
    return spec_from_dict(doc)


def record(cache: SpeedCache, spec: PipelineSpec, framework: str, samples_per_s: float, *, hardware: str,
           version: str = "", measured_at: float = NOW - 3600, resources: Resources | None = None,
           step_s: float | None = None, **terms: Any) -> None:
    """What a calibration job of ``framework`` would have left in the cache (``terms``: its whole-run figures)."""
    analysis = validate(spec)
    version = version or {"torch": "2.13.0", "keras": "3.15.1", "paddle": "3.3.1"}[framework]
    res = resources or Resources(cpus_per_task=spec.training.resources.cpus_per_task, time_limit_min=30)
    key = speed_key(spec, analysis, framework, "all", "/opt/all/bin/python", None, hardware, res)
    cache.put(Measurement(key, framework, version, "all", "cpu", hardware, "slurm", "42", measured_at, samples_per_s,
                          step_s or 64 / samples_per_s, 2.0, 1437, train_macs_per_sample(analysis), {"samples_per_s": samples_per_s},
                          **terms))


def choose(spec: PipelineSpec, util: dict[str, Any], cache: SpeedCache | None, **kw: Any) -> Any:
    book = SpeedBook(cache, now=NOW)
    return select(spec, validate(spec), REPORTS, util, support=all_supported, speeds=book, **kw)


HW = idle()["cpu"].hardware


def test_cache_file_is_private_and_round_trips(tmp_path: Path) -> None:
    cache = SpeedCache(tmp_path)
    record(cache, mnist(), "keras", 2130.0, hardware=HW)
    assert stat.S_IMODE((tmp_path / "calibration.db").stat().st_mode) == 0o600
    [m] = cache.all()
    assert (m.framework, m.samples_per_s, m.hardware, m.doc) == ("keras", 2130.0, HW, {"samples_per_s": 2130.0})


def test_auto_picks_the_measured_fastest_and_says_the_numbers(tmp_path: Path) -> None:
    cache = SpeedCache(tmp_path)
    spec = mnist()
    for fw, rate in (("torch", 1760.0), ("keras", 2130.0), ("paddle", 410.0)):
        record(cache, spec, fw, rate, hardware=HW)
    sel = choose(spec, idle(), cache)
    assert (sel.framework, sel.partition) == ("keras", "cpu")  # cpu and gpu have the same nodes: default cpu
    # 12 epochs x 1437 samples at 2130/s = 8 s of training; start-up: 2 s measured + launch 5 s (default);
    # 12 validation passes of 360 samples; 12 checkpoints and the final model (defaults): ~17 s.
    # keras and torch overlap: the reasons say it is a toss-up; paddle is far off.
    assert sel.reasons[0] == (
        "chose keras on partition cpu: it can start now (16 idle CPUs, 0 pending); keras and torch finish within "
        "the estimates' uncertainty (~17 s (11–32 s) against ~19 s (12–34 s)): none of them is preferred "
        "(training.framework), so the nearest estimate decides")
    assert sel.reasons[1] == ("time to result: keras on cpu: 2,130 samples/s measured, done in ~17 s, could be "
                              "11–32 s (start-up 7 s, training 8 s, validation 1 s, checkpoints and end 1 s, wait "
                              "none); torch on cpu: 1,760, ~19 s (12–34 s); paddle on cpu: 410, ~54 s (41–78 s)")
    keras = next(c for c in sel.candidates if (c.framework, c.partition) == ("keras", "gpu"))
    assert keras.speed_source == "measured" and keras.wait_s == 0 and keras.measured_at == NOW - 3600
    assert keras.estimate["sources"]["train"] == "measured" and "launch default" in keras.estimate["sources"]["startup"]
    # --framework (require) still wins over speed; a spec preference decides within the uncertainty only.
    assert choose(spec, idle(), cache, require="paddle").framework == "paddle"
    torch = choose(mnist("torch"), idle(), cache)
    assert torch.framework == "torch" and torch.reasons[0].endswith("your preferred framework decides")
    paddle = choose(mnist("paddle"), idle(), cache)  # beyond the uncertainty: the estimate, not the preference
    assert paddle.framework == "keras" and paddle.reasons[0].endswith(
        "keras and torch finish within the estimates' uncertainty (~17 s (11–32 s) against ~19 s (12–34 s)): "
        "preferred paddle is not among them, so the nearest estimate decides; preferred paddle finishes later, "
        "beyond the estimates' uncertainty (on cpu: ~54 s (41–78 s))")


def test_without_measurements_the_shipped_defaults_estimate_and_preference_or_fixed_order_decides(
        tmp_path: Path) -> None:
    """A fresh home: each framework's step time and start-up come from its shipped defaults (a development
    machine's figures, said so); within their wide uncertainty the preference decides, and without one the
    fixed order, not figures measured elsewhere."""
    spec = mnist("paddle")
    sel = choose(spec, idle(), SpeedCache(tmp_path))
    assert sel.framework == "paddle" and sel.reasons[0].endswith("your preferred framework decides")
    # however far apart another machine's figures put them: a segmentation spec asking for torch got keras
    picked = {fw: choose(mnist(fw), idle(), SpeedCache(tmp_path)).framework for fw in ("torch", "keras", "paddle")}
    assert picked == {"torch": "torch", "keras": "keras", "paddle": "paddle"}
    c = sel.candidates[0]
    analysis = validate(spec)
    step = SHIPPED["paddle"].step().step_s(train_macs_per_sample(analysis), analysis.total_params, 64,
                                           train_acts_per_sample(analysis))
    assert c.speed_source == "model" and c.samples_per_s == pytest.approx(64 / step)
    assert "from the MACs model" in c.reason and \
        "shipped paddle defaults measured on a shared 2-core development machine, not on these nodes" in c.reason
    assert c.estimate["startup_s"] == pytest.approx(SHIPPED["paddle"].launch_s + SHIPPED["paddle"].startup_s
                                                    + SHIPPED["paddle"].warmup_s)
    auto = choose(mnist(), idle(), SpeedCache(tmp_path))
    assert auto.framework == "torch" and auto.reasons[0].endswith(
        "nothing is measured on these nodes yet (the estimates are a development machine's figures), so the fixed "
        "order (torch, keras, paddle) decides"), auto.reasons[0]


def test_stale_measurements_fall_back_to_the_model_and_say_why(tmp_path: Path) -> None:
    cache = SpeedCache(tmp_path)
    spec = mnist()
    record(cache, spec, "keras", 2130.0, hardware=HW, version="3.14.0")  # the environment now has 3.15.1
    record(cache, spec, "torch", 1760.0, hardware=HW, measured_at=NOW - 40 * 86400)  # older than 30 days
    sel = choose(spec, idle(), cache)
    by = {c.framework: c for c in sel.candidates if c.partition == "cpu"}
    assert by["keras"].speed_source == "model" and "measured with keras 3.14.0, the environment now has 3.15.1" \
        in by["keras"].reason
    assert by["torch"].speed_source == "model" and "measured 40 days ago (older than 30 days)" in by["torch"].reason


def test_the_model_learns_the_rate_of_measurements_on_the_same_nodes(tmp_path: Path) -> None:
    """A graph never measured gets the MACs/s its framework reached on these nodes with another graph."""
    cache = SpeedCache(tmp_path)
    measured = mnist()
    record(cache, measured, "keras", 2000.0, hardware=HW)
    other = spec_from_dict({**measured.model_dump(mode="json"), "name": "wider"})
    doc = other.model_dump(mode="json")
    doc["data"]["batch_size"] = 32  # another key: not the measured graph
    other = spec_from_dict(doc)
    sel = choose(other, idle(), cache)
    keras = next(c for c in sel.candidates if (c.framework, c.partition) == ("keras", "cpu"))
    assert keras.speed_source == "model"
    assert keras.samples_per_s == pytest.approx(2000.0)  # same MACs per sample, same rate
    assert "the median of 1 measurement(s) of keras on these nodes" in keras.speed_note


def test_a_busy_partition_moves_the_choice_to_the_soonest_finish(tmp_path: Path) -> None:
    """keras measured fastest; partition cpu (n1, n2) held by a job for another 30 min: keras on gpu
    (n3, n4 idle) finishes sooner. Held for a day while only torch serves gpu: keras still wins if it
    is sooner — here torch on gpu is."""
    cache = SpeedCache(tmp_path)
    spec = mnist()
    for fw, rate in (("torch", 1760.0), ("keras", 2130.0), ("paddle", 410.0)):
        record(cache, spec, fw, rate, hardware=HW)
    util = cpu_partition_full(until=NOW + 1800)
    assert util["cpu"].expected_wait_s(1, 0, 2, 0) == pytest.approx(1800)
    assert util["gpu"].expected_wait_s(1, 0, 2, 0) == 0
    assert util["gpu"].expected_wait_s(3, 0, 2, 0) == pytest.approx(1800)  # a third node: n1 or n2, later
    sel = choose(spec, util, cache)
    assert (sel.framework, sel.partition) == ("keras", "gpu")
    waiting = next(c for c in sel.candidates if (c.framework, c.partition) == ("keras", "cpu"))
    assert waiting.wait_s == pytest.approx(1800) and "wait 30 min)" in waiting.reason

    split = [env_report("k", ("cpu",), keras="3.15.1"), env_report("tp", ("gpu",), torch="2.13.0", paddle="3.3.1")]
    for fw in ("torch", "paddle"):
        record_env(cache, spec, fw, {"torch": 1760.0, "paddle": 410.0}[fw], env="tp")
    record_env(cache, spec, "keras", 2130.0, env="k")
    book = SpeedBook(cache, now=NOW)
    free = select(spec, validate(spec), split, idle(), support=all_supported, speeds=book)
    assert (free.framework, free.partition) == ("keras", "cpu")
    busy = select(spec, validate(spec), split, util, support=all_supported, speeds=book)
    assert (busy.framework, busy.partition) == ("torch", "gpu")
    assert "it finishes soonest" in busy.reasons[0]
    assert min(c.finish_s for c in busy.candidates if c.feasible) == busy.candidates[0].finish_s


def record_env(cache: SpeedCache, spec: PipelineSpec, framework: str, rate: float, env: str) -> None:
    analysis = validate(spec)
    res = Resources(cpus_per_task=2, time_limit_min=30)
    key = speed_key(spec, analysis, framework, env, f"/opt/{env}/bin/python", None, HW, res)
    version = {"torch": "2.13.0", "keras": "3.15.1", "paddle": "3.3.1"}[framework]
    cache.put(Measurement(key, framework, version, env, "cpu", HW, "slurm", "7", NOW - 60, rate, 64 / rate, 2.0, 1437,
                          train_macs_per_sample(analysis), {}))


def test_unknown_wait_counts_as_an_hour() -> None:
    sinfo, squeue = captured()
    util = utilisation_from_outputs(sinfo, squeue, partitions(), now=1_796_002_500)  # when it was captured
    # n1, n2 are held by a job without a time limit (end time a year away); n3 drained, n4 down.
    assert util["gpu"].expected_wait_s(1, 2, 1, 0) > 300 * 86400
    local = {"local": _local_busy()}
    sel = select(mnist(), None, REPORTS, local, scheduler="local", support=all_supported)
    c = sel.candidates[0]
    assert c.wait_s is None and c.finish_s == pytest.approx(UNKNOWN_WAIT_S + c.train_s)
    assert "wait unknown, counted as ~60 min" in c.reason


def _local_busy() -> Any:
    from schedulers.utilisation import local_utilisation

    return local_utilisation(gpus=0, alloc_cpus=10_000, running_jobs=1)


def test_the_key_ignores_what_does_not_change_a_step() -> None:
    spec = mnist()
    a = validate(spec)
    res = Resources(cpus_per_task=2)
    key = speed_key(spec, a, "keras", "e", "/p", None, HW, res)
    renamed = spec_from_dict({**spec.model_dump(mode="json"), "name": "other", "description": "x"})
    doc = spec.model_dump(mode="json")
    doc["training"]["epochs"] = 99
    doc["training"]["optimizer"]["lr"] = 0.5
    longer = spec_from_dict(doc)
    assert speed_key(renamed, a, "keras", "e", "/p", None, HW, res) == key
    assert speed_key(longer, a, "keras", "e", "/p", None, HW, res) == key
    doc["data"]["batch_size"] = 128
    assert speed_key(spec_from_dict(doc), a, "keras", "e", "/p", None, HW, res) != key
    assert speed_key(spec, a, "keras", "e", "/p", None, HW + "; other", res) != key
    assert speed_key(spec, a, "keras", "e", "/p", None, HW, Resources(cpus_per_task=4)) != key
    assert planned_train_samples(spec) == 1437  # digits: 1797 less the 20 % validation split
    assert [duration_words(s) for s in (5, 83, 400, 7200, 5 * 86400)] == ["~5 s", "~83 s", "~7 min", "~2.0 h",
                                                                          "~5 days"]
    json.dumps(select(spec, a, REPORTS, idle(), support=all_supported).to_dict())  # the portal shows it as JSON


def test_one_users_figures_do_not_steer_anothers_estimate(tmp_path: Path) -> None:
    """A shared home (one portal account): bob's extreme measurements, of the same graph and of
    another, change neither alice's measured speed nor her MACs model's rate."""
    alice, bob = SpeedCache(tmp_path, "alice"), SpeedCache(tmp_path, "bob")
    spec = mnist()
    record(alice, spec, "keras", 2000.0, hardware=HW)
    other = spec_from_dict({**spec.model_dump(mode="json"), "data": {**spec.model_dump(mode="json")["data"],
                                                                     "batch_size": 32}})

    def alice_sees() -> tuple[float, float]:
        measured = next(c for c in choose(spec, idle(), alice).candidates if (c.framework, c.partition) == ("keras", "cpu"))
        modelled = next(c for c in choose(other, idle(), alice).candidates if (c.framework, c.partition) == ("keras", "cpu"))
        assert (measured.speed_source, modelled.speed_source) == ("measured", "model")
        return measured.samples_per_s, modelled.samples_per_s

    before = alice_sees()
    assert before == (pytest.approx(2000.0), pytest.approx(2000.0))
    for graph in (spec, mnist(epochs=3), spec_from_dict({**spec.model_dump(mode="json"), "name": "bobs"})):
        record(bob, graph, "keras", 9e9, hardware=HW)
        record(bob, graph, "torch", 1e-3, hardware=HW)
    bob_other = next(c for c in choose(other, idle(), bob).candidates if (c.framework, c.partition) == ("keras", "cpu"))
    assert bob_other.samples_per_s == pytest.approx(9e9)  # bob's own estimate follows his figures
    assert alice_sees() == before
    assert [m.user for m in alice.all()] == ["alice"] and {m.user for m in bob.all()} == {"bob"}


def test_a_cache_from_before_per_user_measurements_becomes_its_owners(tmp_path: Path) -> None:
    import sqlite3

    from settings.access import os_user

    old_schema = ("CREATE TABLE measurements (key TEXT PRIMARY KEY, framework TEXT NOT NULL, version TEXT NOT NULL, "
                  "environment TEXT NOT NULL, partition TEXT NOT NULL, hardware TEXT NOT NULL, scheduler TEXT NOT NULL, "
                  "job_id TEXT NOT NULL, measured_at REAL NOT NULL, samples_per_s REAL NOT NULL, step_s REAL NOT NULL, "
                  "startup_s REAL NOT NULL, train_samples INTEGER NOT NULL, macs_per_sample INTEGER NOT NULL, "
                  "doc TEXT NOT NULL)")
    with sqlite3.connect(tmp_path / "calibration.db") as conn:
        conn.execute(old_schema)
        conn.execute("INSERT INTO measurements VALUES ('k1', 'torch', '2.13.0', 'all', 'cpu', ?, 'slurm', '5', ?, "
                     "1500.0, 0.04, 2.0, 1437, 1000, '{}')", (HW, NOW - 60))
    conn.close()
    assert SpeedCache(tmp_path, "someone-else").all() == []
    [m] = SpeedCache(tmp_path).all()  # the OS user, who owns the file
    assert (m.user, m.key, m.samples_per_s, m.job_id) == (os_user(), "k1", 1500.0, "5")
    assert SpeedCache(tmp_path).get("k1") == m
