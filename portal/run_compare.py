"""Runs told apart at a glance (pure: no Streamlit, unit-tested): the legend name of a run, its headline
validation metric (final and best) and the compare table's row.

The headline metric is the one a researcher reads first: accuracy for a classifier, mean IoU for segmentation (higher is better),
else the loss (lower is better); from the ``epoch`` records of the validation split (the test split when
the run has no validation split).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portal.curves import curve_rows

HEADLINE = ("mIoU", "accuracy", "loss", "mse", "mae")  # the first one a run reports is its headline metric
HIGHER_IS_BETTER = {"accuracy", "mIoU"}
SHORT_ID = 6  # the random tail of a run id (YYYYMMDD-HHMMSS-xxxxxx): what tells two runs of a minute apart


def short_id(run_id: str) -> str:
    return run_id.rsplit("-", 1)[-1][:SHORT_ID] if "-" in run_id else run_id[:SHORT_ID]


def legend(name: str, framework: str, run_id: str) -> str:
    """How a run is named in a chart's legend: ``name · framework · short id`` (never cut to one prefix)."""
    return f"{name} · {framework} · {short_id(run_id)}"


@dataclass(frozen=True)
class Headline:
    split: str
    metric: str
    final: float
    best: float
    epochs: int  # evaluated epochs

    def cell(self) -> str:
        return f"{self.split} {self.metric} {_fmt(self.final)}"


def _fmt(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.1f}"


def headline(records: list[dict[str, Any]]) -> Headline | None:
    """The run's headline metric over its evaluated epochs; ``None`` before the first evaluation."""
    rows = [r for r in curve_rows(records) if r["split"] in ("val", "test") and r["epoch"] is not None]
    for split in ("val", "test"):
        of_split = [r for r in rows if r["split"] == split]
        for metric in HEADLINE:
            values = [r["value"] for r in of_split if r["metric"] == metric]
            if values:
                best = max(values) if metric in HIGHER_IS_BETTER else min(values)
                return Headline(split, metric, values[-1], best, len(values))
    return None


def samples_per_s(records: list[dict[str, Any]]) -> float | None:
    """The mean training throughput the program reported (its ``train`` records)."""
    speeds = [float(r["samples_per_s"]) for r in records if r.get("event") == "train"
              and isinstance(r.get("samples_per_s"), (int, float)) and not isinstance(r.get("samples_per_s"), bool)]
    return sum(speeds) / len(speeds) if speeds else None


def compare_row(run: Any, records: list[dict[str, Any]], planned_epochs: int | None, duration: str) -> dict[str, Any]:
    """One row of the compare table (``run``: a registry Run)."""
    head = headline(records)
    speed = samples_per_s(records)
    return {
        "run": legend(run.name, run.framework, run.id),
        "name": run.name, "framework": run.framework, "scheduler": run.scheduler,
        "epochs": f"{head.epochs if head else 0}/{planned_epochs}" if planned_epochs else str(head.epochs if head else 0),
        "metric": f"{head.split} {head.metric}" if head else "–",
        "final": _fmt(head.final) if head else "–",
        "best": _fmt(head.best) if head else "–",
        "duration": duration,
        "samples/s": f"{speed:,.0f}" if speed is not None else "–",
        "state": run.state.value,
    }
