"""Segmentation's loss and metric counts in the generated programs (each framework's
_segmentation_loss.py.j2): per-pixel cross-entropy averaged over the pixels that are not the ignore index
(Keras's per-sample shares average to it), with the soft Dice loss added as an option, and the confusion matrix of the counted pixels, equal in
torch, Keras and paddle to numpy's. One subprocess per framework, shared with the other checks of
tests/frameworks/shared_start.py."""

from __future__ import annotations

import numpy as np
import pytest

from core.codegen import environment
from tests.frameworks.shared_start import findings

pytestmark = pytest.mark.frameworks

HEADER = {
    "torch": "import torch\nfrom torch.nn import functional as F\n",
    "paddle": "import paddle\nfrom paddle.nn import functional as F\n",
    "keras": "import tensorflow as tf\n",
}
RUN = """
import json
import numpy as np
globals().update(namespaces["cross_entropy"])
dice_namespace = namespaces["cross_entropy_dice"]
rng = np.random.default_rng(0)
logits = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
masks = rng.integers(0, 3, (2, 5, 6))
masks[0, 0, :4] = 255
if FW == "keras":
    out, y = tf.constant(logits), tf.constant(masks)
    loss = float(tf.reduce_mean(per_sample_loss(out, y)))
    totals = batch_totals(out, y, per_sample_loss(out, y)).numpy().tolist()
    accuracy = totals[1] / totals[-1]
else:
    to = torch.from_numpy if FW == "torch" else paddle.to_tensor
    out, y = to(logits), to(masks)
    loss = float(compute_loss(out, y))
    if FW == "torch":
        sums = batch_sums(compute_loss(out, y), out, y)
        accuracy = float(sums[1]) / len(masks)
    else:
        accuracy = float(batch_metrics(out, y)[0]) / len(masks)
if FW == "keras":
    with_dice = float(tf.reduce_mean(dice_namespace["per_sample_loss"](out, y)))
else:
    with_dice = float(dice_namespace["compute_loss"](out, y))
plain = namespaces["no_ignore_index"]
whole = np.where(masks == 255, 1, masks)
if FW == "keras":
    whole_y = tf.constant(whole)
    plain_loss = float(tf.reduce_mean(plain["per_sample_loss"](out, whole_y)))
else:
    whole_y = to(whole)
    plain_loss = float(plain["compute_loss"](out, whole_y))
print(json.dumps({"loss": loss, "confusion": np.asarray(confusion(out, y)).tolist(), "accuracy": accuracy,
                  "with_dice": with_dice, "plain_loss": plain_loss,
                  "plain_confusion": np.asarray(plain["confusion"](out, whole_y)).tolist()}))
"""


def _expected(ignore_index: int | None = 255) -> tuple[float, np.ndarray, float]:
    """numpy's loss, confusion matrix and Dice loss of the script's batch: with the ignore index in four pixels,
    or (None) with those four of class 1 and every pixel counted."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 3, 5, 6)).astype(np.float64)
    masks = rng.integers(0, 3, (2, 5, 6))
    masks[0, 0, :4] = 255 if ignore_index is not None else 1
    counted = masks != 255
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    picked = np.take_along_axis(log_p, np.where(counted, masks, 0)[:, None], axis=1)[:, 0]
    loss = float(-(picked * counted).sum() / counted.sum())
    matrix = np.zeros((3, 3), np.int64)
    np.add.at(matrix, (masks[counted], logits.argmax(axis=1)[counted]), 1)
    probs = np.exp(log_p) * counted[:, None]
    truth = (np.where(counted, masks, 0)[:, None] == np.arange(3)[None, :, None, None]) * counted[:, None]
    dice = (2 * (probs * truth).sum(axis=(0, 2, 3)) + 1) / (probs.sum(axis=(0, 2, 3)) + truth.sum(axis=(0, 2, 3)) + 1)
    return loss, matrix, float(1 - dice.mean())


def script(framework: str) -> str:
    """The check's program in ``framework`` (run by tests/frameworks/shared_start.py)."""
    script = HEADER[framework] + f"FW = {framework!r}\nnamespaces = {{}}\n"
    for name, loss, ignore in (("cross_entropy", "cross_entropy", 255), ("cross_entropy_dice", "cross_entropy_dice", 255),
                               ("no_ignore_index", "cross_entropy", None)):
        source = HEADER[framework] + environment(framework).get_template("_segmentation_loss.py.j2").render(
            data_ignore_index=ignore, data_num_classes=3, t={"loss": loss})
        script += f"namespaces[{name!r}] = {{}}\nexec(compile({source!r}, {name!r}, 'exec'), namespaces[{name!r}])\n"
    return script + RUN


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_per_pixel_cross_entropy_dice_and_confusion_ignore_the_ignore_index(framework: str) -> None:
    got = findings(__name__, framework)
    loss, matrix, dice = _expected()
    assert abs(got["loss"] - loss) <= 1e-5, (got["loss"], loss)
    assert abs(got["with_dice"] - (loss + dice)) <= 1e-5, (got["with_dice"], loss + dice)
    assert np.array_equal(np.asarray(got["confusion"]), matrix)
    assert got["accuracy"] == pytest.approx(np.trace(matrix) / matrix.sum(), abs=1e-6)


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_without_an_ignore_index_every_pixel_counts(framework: str) -> None:
    """The programs of a spec without ignore_index (data.py has checked every mask value) average over all pixels."""
    got = findings(__name__, framework)
    loss, matrix, _ = _expected(ignore_index=None)
    assert abs(got["plain_loss"] - loss) <= 1e-5, (got["plain_loss"], loss)
    assert np.array_equal(np.asarray(got["plain_confusion"]), matrix)
