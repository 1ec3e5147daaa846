"""Loss/accuracy curves from ``metrics.jsonl`` records (pure: no Streamlit, unit-tested).

Records follow docs/generated-program.md: ``train`` events (every N steps, split ``train``) and
``epoch`` events (split ``val`` or ``test``). A curve point is (run, metric, series, step, epoch, value).
"""

from __future__ import annotations

from typing import Any

# every metric a task records (its Totals.metrics() in the generated runtime.py): segmentation its pixel accuracy
# and mean IoU, a language model its token accuracy and perplexity
CURVE_METRICS = ("loss", "accuracy", "mIoU", "pixel_accuracy", "perplexity", "mse", "mae")


def curve_rows(records: list[dict[str, Any]], run: str = "") -> list[dict[str, Any]]:
    """Long-format rows, one per (record, metric): ready for a line chart coloured by series."""
    rows = []
    for rec in records:
        event = rec.get("event")
        if event not in ("train", "epoch"):
            continue
        split = rec.get("split") or ("train" if event == "train" else "val")
        step = rec.get("step")
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            continue
        for metric in CURVE_METRICS:
            value = rec.get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append({"run": run, "metric": metric, "series": f"{run} {split}".strip() if run else split,
                             "split": split, "step": int(step), "epoch": rec.get("epoch"), "value": float(value)})
    return rows


def metrics_present(rows: list[dict[str, Any]]) -> list[str]:
    seen = {r["metric"] for r in rows}
    return [m for m in CURVE_METRICS if m in seen]


def last_values(records: list[dict[str, Any]]) -> dict[str, float]:
    """The latest value of each metric per split, e.g. ``{"val accuracy": 0.91, "train loss": 0.2}``."""
    out: dict[str, float] = {}
    for row in curve_rows(records):
        out[f"{row['split']} {row['metric']}"] = row["value"]
    return out


def progress(records: list[dict[str, Any]], epochs: int | None) -> tuple[int, int | None, float | None]:
    """(current epoch, total epochs, samples/s of the last train record)."""
    epoch, speed = 0, None
    for rec in records:
        if isinstance(rec.get("epoch"), int):
            epoch = max(epoch, rec["epoch"] + (1 if rec.get("event") == "epoch" else 0))
        if rec.get("event") == "train" and isinstance(rec.get("samples_per_s"), (int, float)):
            speed = float(rec["samples_per_s"])
    return epoch, epochs, speed
