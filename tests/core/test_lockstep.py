"""The lockstep check's own logic (no framework): the check spec, the measures, the comparison.
Training the three programs in lockstep is tests/cli/test_check_training.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core import zoo
from core.lockstep import FrameworkRun, LockstepReport, check_spec, compare, relative_diff


def test_the_check_spec_switches_off_augmentation_and_dropout_and_starts_from_the_weights(tmp_path: Path) -> None:
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    doc["data"]["augmentation"] = [{"op": "horizontal_flip", "p": 0.5}]
    spec = type(zoo.template("mnist_cnn")).model_validate(doc)
    checked = check_spec(spec, tmp_path / "start.npz")
    assert checked.data.augmentation == []
    dropouts = [n for n in checked.model.nodes if n.op == "Dropout"]
    assert dropouts and all(n.params["p"] == 0.0 for n in dropouts)
    assert checked.training.init_weights == str(tmp_path / "start.npz")
    assert (checked.training.precision, checked.training.log_every_steps) == ("fp32", 1)
    assert checked.training.optimizer == spec.training.optimizer and checked.training.schedule == spec.training.schedule


def test_the_check_spec_zeroes_attention_dropout() -> None:
    checked = check_spec(zoo.template("transformer_text_classifier"), Path("/w.npz"))
    attention = [n for n in checked.model.nodes if "dropout" in n.params]
    assert attention and all(n.params["dropout"] == 0.0 for n in attention)


def test_relative_diff_is_over_the_whole_array() -> None:
    b = np.ones(100, np.float32)
    a = b.copy()
    a[0] += 1.0  # one element off by 100 %
    assert abs(relative_diff(a, b) - 0.1) < 1e-12  # ‖(1, 0, …)‖ / ‖ones(100)‖
    assert relative_diff(b, b) == 0.0


def run(framework: str, losses: dict[int, float], weight: float) -> FrameworkRun:
    return FrameworkRun(framework, "ok", losses=losses, weights={"fc/weight": np.full(4, weight)})


def test_compare_measures_against_torch_and_fails_beyond_the_tolerances() -> None:
    runs = {"torch": run("torch", {1: 2.0, 2: 1.0}, 1.0), "keras": run("keras", {1: 2.0, 2: 1.00005}, 1.0005),
            "paddle": run("paddle", {1: 2.0, 2: 1.001}, 1.0)}
    compare(runs)
    assert abs(runs["keras"].loss_diff - 5e-5) < 1e-9 and abs(runs["keras"].weight_diff - 5e-4) < 1e-9
    assert runs["keras"].worst_weight == "fc/weight"
    assert abs(runs["paddle"].loss_diff - 1e-3) < 1e-9
    assert not LockstepReport("x", 2, runs).ok  # paddle's loss is 1e-3 off
    runs.pop("paddle")
    report = LockstepReport("x", 2, runs)
    assert report.ok
    assert "keras: loss within 5.00e-05" in report.text()


def test_a_framework_that_logged_other_steps_fails() -> None:
    runs = {"torch": run("torch", {1: 2.0, 2: 1.0}, 1.0), "paddle": run("paddle", {1: 2.0}, 1.0)}
    compare(runs)
    assert runs["paddle"].status == "failed" and "[2]" in runs["paddle"].detail


def test_an_lstms_two_biases_compare_as_their_sum_and_a_grus_do_not() -> None:
    """Keras's LSTM has one bias (torch's b_ih + b_hh), read back as b_ih = sum, b_hh = 0: the same
    function as torch's, which compares equal; a GRU's b_hh is not additive and compares as it is."""
    hidden = 3
    lstm = {"rnn/weight_hh_l0": np.ones((4 * hidden, hidden)), "rnn/bias_ih_l0": np.full(4 * hidden, 0.25),
            "rnn/bias_hh_l0": np.full(4 * hidden, 0.75)}
    summed = {**lstm, "rnn/bias_ih_l0": np.ones(4 * hidden), "rnn/bias_hh_l0": np.zeros(4 * hidden)}
    gru = {"g/weight_hh_l0": np.ones((3 * hidden, hidden)), "g/bias_ih_l0": np.full(3 * hidden, 0.25),
           "g/bias_hh_l0": np.full(3 * hidden, 0.75)}
    gru_summed = {**gru, "g/bias_ih_l0": np.ones(3 * hidden), "g/bias_hh_l0": np.zeros(3 * hidden)}
    runs = {"torch": FrameworkRun("torch", "ok", losses={1: 1.0}, weights={**lstm, **gru}),
            "keras": FrameworkRun("keras", "ok", losses={1: 1.0}, weights={**summed, **gru})}
    compare(runs)
    assert runs["keras"].weight_diff == 0.0
    runs["keras"].weights = {**summed, **gru_summed}
    compare(runs)
    assert runs["keras"].worst_weight in ("g/bias_ih_l0", "g/bias_hh_l0") and runs["keras"].weight_diff > 0.5
