"""The lockstep check's own logic (no framework): the check spec, the measures, the comparison.
Training the three programs in lockstep is tests/cli/test_check_training.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import flowtrain
from core import zoo
from core.codegen import generate
from core.lockstep import (
    RANKED_EPOCH_STEPS,
    FrameworkRun,
    LockstepError,
    LockstepReport,
    check_spec,
    check_training,
    compare,
    one_ulp_away,
    ranked_spec,
    relative_diff,
)


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


def epoch_batches(spec, folder: Path, world: int, n: int) -> list[list[list[int]]]:
    """[epoch][rank] → that rank's batches of the generated program's runtime.epoch_batches, for 2 epochs."""
    generate(spec, "torch").write(folder)
    code = (f"import json, runtime; print(json.dumps([[[b.tolist() for b in runtime.epoch_batches(e, {n}, "
            f"runtime.Processes(r, {world}))] for r in range({world})] for e in (0, 1)]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_two_ranks_get_the_global_batches_of_one_process(tmp_path: Path) -> None:
    """check-training --ranks 2: each global batch of the two processes is the batch of one process with
    twice the batch size, also across the end of an epoch of an odd number of samples (1437: the digits'
    training split), where an ordinary epoch would give one process a sample the two do not see."""
    spec = check_spec(zoo.template("mlp"), tmp_path / "start.npz")
    two, one = ranked_spec(spec, 2, 64), ranked_spec(spec, 2, 128)
    assert two.training.samples_per_epoch == one.training.samples_per_epoch == 2 * 64 * RANKED_EPOCH_STEPS
    shares = epoch_batches(two, tmp_path / "two", 2, 1437)
    whole = epoch_batches(one, tmp_path / "one", 1, 1437)
    for epoch in (0, 1):
        [alone] = whole[epoch]
        assert len(alone) == RANKED_EPOCH_STEPS and {len(b) for b in alone} == {128}
        together = [sorted(a + b) for a, b in zip(*shares[epoch], strict=True)]
        assert together == [sorted(b) for b in alone]
    assert whole[0][0] != whole[1][0]  # a new order every epoch


def test_an_attentions_key_bias_is_reported_apart_and_not_held_to_the_bound() -> None:
    """The key third of torch's packed in_proj_bias is one the loss does not depend on (softmax ignores a
    constant per query; tests/frameworks/test_attention_key_bias.py): its difference is reported as
    gradient-free, and the query and value thirds are held to the bound as every other array."""
    e = 4
    torch_bias = np.concatenate([np.full(e, 1.0), np.full(e, 2.0), np.full(e, 3.0)])
    keys_apart = torch_bias.copy()
    keys_apart[e:2 * e] += 0.5  # what Adam's steps on rounding noise do to the key bias
    runs = {"torch": FrameworkRun("torch", "ok", losses={1: 1.0}, weights={"att/in_proj_bias": torch_bias}),
            "keras": FrameworkRun("keras", "ok", losses={1: 1.0}, weights={"att/in_proj_bias": keys_apart})}
    compare(runs)
    keras = runs["keras"]
    assert (keras.weight_diff, keras.free_weight) == (0.0, "att/in_proj_bias[key]")
    assert abs(keras.free_diff - 0.25) < 1e-12  # ‖0.5·ones(4)‖ / ‖2·ones(4)‖
    report = LockstepReport("x", 1, runs)
    assert report.ok
    assert "att/in_proj_bias[key] within 2.50e-01, not held to the bound: an attention's key bias" in report.text()
    assert report.to_dict()["frameworks"]["keras"]["gradient_free_weight"] == "att/in_proj_bias[key]"
    values_apart = torch_bias.copy()
    values_apart[2 * e:] += 0.5
    runs["keras"].weights = {"att/in_proj_bias": values_apart}
    compare(runs)
    assert keras.worst_weight == "att/in_proj_bias[value]" and abs(keras.weight_diff - 0.5 / 3) < 1e-12  # ‖0.5·ones(4)‖ / ‖3·ones(4)‖
    assert not LockstepReport("x", 1, runs).ok


def floor_sample(k: int, loss_diff: float, weight_diff: float) -> FrameworkRun:
    return FrameworkRun(f"torch-1ulp-{k}", "ok", loss_diff=loss_diff, weight_diff=weight_diff,
                        worst_weight="fc/weight")


def test_the_bound_is_twice_the_largest_floor_sample() -> None:
    """check-training --floor: torch from three starts one ulp away parts from itself by 2e-5, 3e-4 and 4e-5 in
    loss (weights 1e-4, 2e-4, 3e-3); a program 5e-4 from torch's loss is within twice the largest (6e-4),
    though not within twice the first sample's; one 7e-4 away is not. The loss's and the weights' largest may
    come from different samples."""
    runs = {"torch": run("torch", {1: 2.0, 2: 1.0}, 1.0), "keras": run("keras", {1: 2.0, 2: 1.0005}, 1.0)}
    compare(runs)
    floors = [floor_sample(1, 2e-5, 1e-4), floor_sample(2, 3e-4, 2e-4), floor_sample(3, 4e-5, 3e-3)]
    report = LockstepReport("x", 2, runs, floors=floors)
    assert report.tolerances == (2 * 3e-4, 2 * 3e-3)
    assert report.ok
    assert not LockstepReport("x", 2, runs, floors=floors[:1]).ok  # one sample's luck: 5e-4 > 2 · 2e-5
    floor = report.to_dict()["floor"]
    assert (floor["status"], floor["loss_diff"], floor["weight_diff"], floor["samples"]) == ("ok", 3e-4, 3e-3, 3)
    samples = report.to_dict()["floor_samples"]
    assert [(s["name"], s["loss_diff"]) for s in samples] == [("torch-1ulp-1", 2e-5), ("torch-1ulp-2", 3e-4),
                                                              ("torch-1ulp-3", 4e-5)]
    assert "the largest over 3 sample(s): loss 3.00e-04, weights 3.00e-03" in report.text()
    runs["keras"].losses[2] = 1.0007
    compare(runs)
    assert not report.ok


def test_a_floor_sample_that_did_not_train_leaves_the_targets_and_says_so() -> None:
    runs = {"torch": run("torch", {1: 2.0, 2: 1.0}, 1.0), "keras": run("keras", {1: 2.0, 2: 1.0005}, 1.0)}
    compare(runs)
    floors = [floor_sample(1, 3e-4, 1e-4), FrameworkRun("torch-1ulp-2", "failed", "train.py exited with 1")]
    report = LockstepReport("x", 2, runs, floors=floors)
    assert report.tolerances == (1e-4, 1e-3) and not report.ok  # 5e-4 over the loss target
    assert report.to_dict()["floor"]["status"] == "failed"
    text = report.text()
    assert "torch-1ulp-2 (torch one ulp away): failed: train.py exited with 1" in text
    assert "no floor: torch-1ulp-2: train.py exited with 1; the programs are held to the targets" in text


def test_a_start_one_ulp_away_moves_every_float_weight_one_ulp_either_way() -> None:
    rng = np.random.default_rng(5)
    start = {"fc/weight": rng.standard_normal((30, 40)).astype(np.float32), "steps": np.arange(3)}
    moved = {seed: one_ulp_away(start, seed) for seed in (1, 2)}
    for weights in moved.values():
        w, w0 = weights["fc/weight"], start["fc/weight"]
        up, down = np.nextafter(w0, np.inf, dtype=np.float32), np.nextafter(w0, -np.inf, dtype=np.float32)
        assert np.all((w == up) | (w == down))
        assert 0.4 < np.mean(w == up) < 0.6  # both ways, about half each
        assert np.array_equal(weights["steps"], start["steps"])
    assert not np.array_equal(moved[1]["fc/weight"], moved[2]["fc/weight"])  # each seed a different start
    assert np.array_equal(one_ulp_away(start, 1)["fc/weight"], moved[1]["fc/weight"])  # and the same again


def test_arguments_that_give_no_check_are_problems_naming_the_option(capsys) -> None:
    spec = zoo.template("mlp")
    try:
        check_training(spec, steps=0, frameworks=["keras"], floor=True, floor_samples=0)
    except LockstepError as exc:
        assert [p.location for p in exc.problems] == ["--steps", "--floor-samples", "--frameworks"]
        assert "received 0; expected a whole number of at least 1" in str(exc)
    else:
        raise AssertionError("check_training trained with steps=0")
    code = flowtrain.main(["check-training", "no-such-spec.json", "--floor-samples", "2", "--ranks", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "2 problem(s) with this check-training command" in err
    assert "--floor-samples: samples of a floor that was not asked for" in err and "Fix: --floor --floor-samples 2" in err
    assert "--ranks: no process to train on" in err


def test_without_torchs_run_the_others_are_not_compared_and_the_report_says_so() -> None:
    runs = {"torch": FrameworkRun("torch", "failed", "train.py exited with 1"), "keras": run("keras", {1: 2.0}, 1.0)}
    floors = [run("torch-1ulp-1", {1: 2.0}, 1.0)]
    compare({**runs, "torch-1ulp-1": floors[0]})
    report = LockstepReport("x", 1, runs, floors=floors)
    assert not report.ok and report.tolerances == (1e-4, 1e-3)
    assert report.to_dict()["floor"]["status"] == "not compared"
    text = report.text()
    assert "torch: failed: train.py exited with 1" in text
    assert "keras: trained, but torch's own run did not, so there is nothing to compare it with" in text
    assert "no floor: torch-1ulp-1: trained, but torch's own run did not" in text
