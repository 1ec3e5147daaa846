"""What a completed run teaches: its predicted and actual time to result, and its own speed figures.

When a run is recorded COMPLETED (:func:`schedulers.reconcile.reconcile`), :func:`learn_from_run`

1. keeps the selector's estimate at submission (the chosen candidate of the run's stored selection:
   the total, its range and its parts) beside what the run took (from submission to the job's end,
   and the program's own ``timings`` in result.json) in the registry's ``estimates`` table, which
   ``flowtrain speeds --accuracy`` summarises per framework and partition;
2. puts the run's figures into the user's speed cache under the candidate's key (:mod:`schedulers.speed`):
   a whole run's steady step time, data and model start-up, validation pass, checkpoint write and end
   replace the 20 steps of a calibration job, or stand in for one never made. The next estimate of the
   graph is therefore the measured one, and the learned MACs model of other graphs counts it too.

A run whose steps differ from the estimate's (``--max-steps``, early stopping) still records its
actual time, marked not comparable, and still teaches its per-step figures.
"""

from __future__ import annotations

import json
import time
from typing import Any

from schedulers.contention import Contention
from schedulers.estimate import WARMUP_STEPS
from schedulers.registry.db import RegistryError
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from schedulers.speed import Measurement, SpeedCache


def chosen_candidate(run: Run) -> dict[str, Any] | None:
    """The candidate of the run's selection it was submitted as (framework and partition), with an estimate."""
    for c in (run.selection or {}).get("candidates", []):
        if c.get("framework") == run.framework and c.get("partition") == run.partition and c.get("estimate"):
            return c
    return None


def learn_from_run(registry: RunRegistry, run_id: str) -> Measurement | None:
    """Record a COMPLETED run's predicted and actual time, and teach the speed cache its figures.
    Returns what the cache learned (``None`` when the run has no estimate or no timings to learn from)."""
    run = registry.get(run_id)
    cand = chosen_candidate(run)
    if cand is None or run.submitted is None or run.ended is None:
        return None
    try:
        result = registry.result(run_id) or {}
    except RegistryError as exc:  # a damaged result.json: the run is still completed; said in its history
        registry.add_event(run_id, f"its time is not learned from: {exc}")
        result = {}
    timings = result.get("timings") if isinstance(result.get("timings"), dict) else None
    est = cand["estimate"]
    counts = est.get("counts", {})
    steps = int(timings.get("steps", 0)) if timings else 0
    actual = {"wait_s": (run.started - run.submitted) if run.started else None, "timings": timings,
              "comparable": steps == counts.get("steps"), "elapsed": result.get("elapsed")}
    predicted = {k: est.get(k) for k in ("wait_s", "startup_s", "train_s", "val_s", "checkpoint_s", "end_s",
                                          "sources", "counts", "load")}  # load: the factor it was scaled by
    with registry.db.tx() as db:
        db.execute("INSERT OR REPLACE INTO estimates (run_id, user, framework, partition, source, predicted_s, low_s,"
                   " high_s, actual_s, predicted, actual, recorded) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                   (run.id, run.user, run.framework, run.partition or "", cand.get("speed_source", ""),
                    cand["finish_s"], cand.get("low_s"), cand.get("high_s"), run.ended - run.submitted,
                    json.dumps(predicted), json.dumps(actual), time.time()))
    if not timings or steps <= 0 or not cand.get("speed_key") or float(timings.get("train_s", 0)) <= 0:
        return None
    learned = _measurement(run, cand, result, timings, counts, steps)
    SpeedCache(registry.home, run.user).put(learned)
    return learned


def _measurement(run: Run, cand: dict[str, Any], result: dict[str, Any], timings: dict[str, Any],
                 counts: dict[str, Any], steps: int) -> Measurement:
    train_s = float(timings["train_s"])
    step_s = train_s / steps
    epochs = max(int(result.get("epochs") or counts.get("epochs") or 1), 1)
    train_samples = int(counts.get("train_samples") or 0)
    samples_per_s = (train_samples * epochs / train_s) if train_samples else counts.get("batch_size", 1) / step_s
    val_passes, ckpts = int(counts.get("val_passes") or 0), int(counts.get("checkpoints") or 0)
    elapsed = result.get("elapsed")
    launch = (run.ended - run.started - float(elapsed)) if run.started and isinstance(elapsed, (int, float)) else None
    return Measurement(
        key=cand["speed_key"], framework=run.framework, version=cand.get("version") or "",
        environment=cand.get("environment") or "", partition=run.partition or "", hardware=cand.get("hardware", ""),
        scheduler=run.scheduler, job_id=run.job_id or "", measured_at=time.time(), samples_per_s=samples_per_s,
        step_s=step_s, startup_s=float(timings.get("startup_s", 0.0)), train_samples=train_samples,
        macs_per_sample=int(counts.get("macs_per_sample") or 0), doc={"run": run.id, "timings": timings},
        launch_s=max(launch, 0.0) if launch is not None else None,
        warmup_s=WARMUP_STEPS * step_s,  # the run's warm-up is inside its training time: no extra term
        val_s=float(timings["val_s"]) / val_passes if val_passes and timings.get("val_s") is not None else None,
        val_samples=int(counts.get("val_samples") or 0) if val_passes else 0,
        checkpoint_s=float(timings["checkpoint_s"]) / ckpts if ckpts and timings.get("checkpoint_s") is not None
        else None,
        end_s=float(timings["end_s"]) if timings.get("end_s") is not None else None,
        params=int(counts.get("params") or 0), batch_size=int(counts.get("batch_size") or 0), source=f"run {run.id}",
        conv_macs_per_sample=int(counts.get("conv_macs_per_sample") or 0),
        acts_per_sample=int(counts.get("acts_per_sample") or 0),
        # the load it was submitted under (the estimate's; a local CPU job): the next estimate scales from it
        contention=Contention.from_dict((cand["estimate"].get("load") or {}).get("contention")),
    )


def accuracy(registry: RunRegistry, user: str) -> list[dict[str, Any]]:
    """The running error of the user's completed runs' estimates, per framework and partition: how many,
    the median ratio actual / predicted, the mean absolute error in percent and the share within 25%
    (comparable runs only: those that took the steps the estimate counted), the latest first."""
    rows = registry.db.conn().execute(
        "SELECT framework, partition, source, predicted_s, actual_s, actual FROM estimates WHERE user=? "
        "ORDER BY recorded DESC", (user,)).fetchall()
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for r in rows:
        if not json.loads(r["actual"]).get("comparable") or r["predicted_s"] <= 0:
            continue
        groups.setdefault((r["framework"], r["partition"]), []).append((r["actual_s"] / r["predicted_s"],
                                                                        r["source"]))
    out = []
    for (framework, partition), ratios in sorted(groups.items()):
        values = sorted(v for v, _ in ratios)
        out.append({"framework": framework, "partition": partition, "runs": len(values),
                    "median_ratio": values[len(values) // 2] if len(values) % 2 else
                    (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2,
                    "mean_abs_error_pct": 100 * sum(abs(v - 1) for v in values) / len(values),
                    "within_25_pct": sum(1 for v in values if abs(v - 1) <= 0.25) / len(values),
                    "latest_ratio": ratios[0][0], "latest_source": ratios[0][1]})
    return out


DIFFER = 1.25  # two runs' times differ when the longer took more than 25% longer: then their order must be predicted


def times_differ(a: float, b: float) -> bool:
    return max(a, b) > DIFFER * min(a, b)


def order_matches(predicted: tuple[float, float], actual: tuple[float, float]) -> bool | None:
    """Whether of two runs the one predicted sooner finished sooner; ``None`` where their actual times are within
    25% of each other (either could have been first: no order to get right, the issue's bar)."""
    if not times_differ(*actual):
        return None
    return (predicted[0] <= predicted[1]) == (actual[0] <= actual[1])


def rankings(registry: RunRegistry, user: str) -> list[dict[str, Any]]:
    """Whether the estimates ranked the frameworks as the runs then finished: every pair of the user's completed,
    comparable runs of one spec (the same spec hash) on two frameworks (each framework's latest run), with both
    predictions, ranges and actual times. ``apart``: the predicted ranges do not overlap (the estimates said which
    finishes first); ``agrees``: the one predicted sooner finished sooner; ``differ``: the actual times differ by more
    than 25% (:data:`DIFFER`). A pair apart, or whose times differ, that does not agree is a ranking the selector
    got wrong."""
    rows = registry.db.conn().execute(
        "SELECT e.framework, e.partition, e.predicted_s, e.low_s, e.high_s, e.actual_s, e.actual, r.spec_hash, "
        "r.name FROM estimates e JOIN runs r ON r.id = e.run_id WHERE e.user=? ORDER BY e.recorded DESC",
        (user,)).fetchall()
    latest: dict[tuple[str, str], Any] = {}
    for r in rows:
        if json.loads(r["actual"]).get("comparable") and r["predicted_s"] > 0:
            latest.setdefault((r["spec_hash"], r["framework"]), r)
    out = []
    for (spec, fw_a), a in sorted(latest.items()):
        for (spec_b, fw_b), b in sorted(latest.items()):
            if spec_b != spec or fw_b <= fw_a:
                continue
            first, second = (a, b) if a["predicted_s"] <= b["predicted_s"] else (b, a)
            ranges = None not in (first["high_s"], second["low_s"])
            out.append({"pipeline": a["name"], "sooner": first["framework"], "later": second["framework"],
                        "predicted_s": [first["predicted_s"], second["predicted_s"]],
                        "range_s": [[first["low_s"], first["high_s"]], [second["low_s"], second["high_s"]]],
                        "actual_s": [first["actual_s"], second["actual_s"]],
                        "apart": ranges and first["high_s"] < second["low_s"],
                        "agrees": first["actual_s"] <= second["actual_s"],
                        "differ": times_differ(first["actual_s"], second["actual_s"])})
    return out


def ranking_words(pairs: list[dict[str, Any]]) -> str:
    """``ranking: 3 pair(s) of frameworks on one pipeline; 2 told apart by the estimates, 2 of them in the
    predicted order; 1 within the uncertainty``, how many of the pairs whose times differ by more than 25% finished
    in the predicted order, and a line per pair in the wrong order (apart, or times differing)."""
    apart = [p for p in pairs if p["apart"]]
    differing = [p for p in pairs if p.get("differ")]
    wrong = [p for p in pairs if (p["apart"] or p.get("differ")) and not p["agrees"]]
    lines = [f"ranking: {len(pairs)} pair(s) of frameworks run on one pipeline; {len(apart)} told apart by the "
             f"estimates (ranges apart), {sum(1 for p in apart if p['agrees'])} of them finished in the predicted "
             f"order; {len(pairs) - len(apart)} within the uncertainty (either could finish first)",
             f"ranking where the runs' times differ by more than 25%: {len(differing)} pair(s), "
             f"{sum(1 for p in differing if p['agrees'])} of them in the predicted order"]
    lines += [f"  wrong order: {p['pipeline']}: {p['sooner']} predicted {p['predicted_s'][0]:.0f} s against "
              f"{p['later']} {p['predicted_s'][1]:.0f} s, took {p['actual_s'][0]:.0f} s against "
              f"{p['actual_s'][1]:.0f} s" for p in wrong]
    return "\n".join(lines)
