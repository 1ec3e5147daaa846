"""metrics.jsonl records → curve rows (portal/curves.py)."""

from portal.curves import curve_rows, last_values, metrics_present, progress

RECORDS = [
    {"event": "start", "step": 0, "epoch": 0},
    {"event": "train", "step": 50, "epoch": 0, "split": "train", "loss": 0.7, "accuracy": 0.8, "samples_per_s": 900.0},
    {"event": "epoch", "step": 60, "epoch": 0, "split": "val", "loss": 0.3, "accuracy": 0.9},
    {"event": "epoch", "step": 120, "epoch": 1, "split": "val", "loss": 0.2, "accuracy": 0.95},
    {"event": "checkpoint", "step": 120, "path": "checkpoints/ckpt-120.pt"},
    {"event": "train", "step": "bad", "loss": 1.0},
    {"event": "end", "status": "completed", "step": 120},
]


def test_curve_rows_and_summaries():
    rows = curve_rows(RECORDS, run="r1")
    assert {(r["series"], r["metric"], r["step"]) for r in rows} == {
        ("r1 train", "loss", 50), ("r1 train", "accuracy", 50), ("r1 val", "loss", 60), ("r1 val", "accuracy", 60),
        ("r1 val", "loss", 120), ("r1 val", "accuracy", 120)}
    assert metrics_present(rows) == ["loss", "accuracy"]
    assert last_values(RECORDS) == {"train loss": 0.7, "train accuracy": 0.8, "val loss": 0.2, "val accuracy": 0.95}
    assert progress(RECORDS, 3) == (2, 3, 900.0)
    assert curve_rows([]) == [] and progress([], None) == (0, None, None)


def test_segmentation_and_language_model_metrics_are_charted():
    segmentation = {"event": "epoch", "step": 9, "epoch": 0, "split": "val", "loss": 0.4, "pixel_accuracy": 0.85, "mIoU": 0.36}
    language = {"event": "train", "step": 3, "epoch": 0, "split": "train", "loss": 2.0, "accuracy": 0.3, "perplexity": 7.39}
    assert metrics_present(curve_rows([segmentation])) == ["loss", "mIoU", "pixel_accuracy"]
    assert last_values([language]) == {"train loss": 2.0, "train accuracy": 0.3, "train perplexity": 7.39}
