"""Runs told apart: legends name · framework · short id, the headline metric final and best."""

from portal.run_compare import headline, legend, samples_per_s, short_id

RECORDS = [
    {"event": "train", "step": 5, "epoch": 0, "split": "train", "loss": 0.9, "samples_per_s": 100.0},
    {"event": "epoch", "step": 10, "epoch": 0, "split": "val", "loss": 0.5, "accuracy": 0.8},
    {"event": "train", "step": 15, "epoch": 1, "split": "train", "loss": 0.4, "samples_per_s": 300.0},
    {"event": "epoch", "step": 20, "epoch": 1, "split": "val", "loss": 0.6, "accuracy": 0.7},
]


def test_legends_differ_for_two_runs_of_one_pipeline_a_second_apart():
    a, b = "20261201-095012-ab12cd", "20261201-095013-ef34ab"
    assert short_id(a) == "ab12cd"
    assert legend("tinycnn", "torch", a) == "tinycnn · torch · ab12cd" != legend("tinycnn", "torch", b)


def test_the_headline_is_accuracy_final_and_best_else_the_loss():
    head = headline(RECORDS)
    assert head is not None and (head.split, head.metric, head.final, head.best, head.epochs) == (
        "val", "accuracy", 0.7, 0.8, 2)
    assert head.cell() == "val accuracy 0.7000"
    regression = [{k: v for k, v in r.items() if k != "accuracy"} for r in RECORDS]
    head = headline(regression)
    assert head is not None and (head.metric, head.final, head.best) == ("loss", 0.6, 0.5)  # lower is better
    assert headline(RECORDS[:1]) is None and samples_per_s(RECORDS) == 200.0
    segmentation = [{**{k: v for k, v in r.items() if k != "accuracy"}, "mIoU": r["accuracy"] / 2}
                    if "accuracy" in r else r for r in RECORDS]
    head = headline(segmentation)
    assert head is not None and (head.metric, head.final, head.best) == ("mIoU", 0.35, 0.4)  # higher is better
