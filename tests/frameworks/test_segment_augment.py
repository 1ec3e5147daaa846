"""Segmentation's augmentation in the generated programs (``segment_augment`` of each framework's
_augment.py.j2): a crop, flip or rotation moves an image and its mask the same way, the mask keeping class
indices (nearest neighbour; pixels from outside the image the ignore index), while brightness, contrast
and noise leave the mask as it was. One subprocess per framework, shared with the other checks of
tests/frameworks/shared_start.py."""

from __future__ import annotations

from typing import Any

import pytest

from core.codegen import environment
from tests.frameworks.shared_start import findings

pytestmark = pytest.mark.frameworks

GEOMETRIC = [{"op": "random_crop", "padding": 3}, {"op": "horizontal_flip", "p": 0.5}]
ROTATION = [{"op": "rotation", "degrees": 40.0}]
PHOTOMETRIC = [{"op": "color_jitter", "brightness": 0.3, "contrast": 0.3}, {"op": "gaussian_noise", "std": 0.1}]

HEADER = {
    "torch": "import math\nimport torch\nfrom torch.nn import functional as F\nSEED = 0\n",
    "paddle": "import math\nimport paddle\nfrom paddle.nn import functional as F\nSEED = 0\n",
    "keras": "import math\nimport tensorflow as tf\nSEED = 0\n",
}
# x channel 0 holds the mask's value, so a move that treats both alike keeps them equal
CHECK = """
import numpy as np
rng = np.random.default_rng(0)
y = np.kron(rng.integers(0, 4, (8, 3, 3)), np.ones((4, 4), np.int64))  # regions of 4x4 pixels
x = np.concatenate([y[:, None].astype(np.float32), rng.random((8, 2, 12, 12), dtype=np.float32)], 1)
def run(name):
    fn = namespace[name]
    if FW == "keras":
        gx, gy = fn(tf.constant(x.transpose(0, 2, 3, 1)), tf.constant(y), 0, tf.constant(3, tf.int64))
        return gx.numpy().transpose(0, 3, 1, 2), gy.numpy()
    to = torch.from_numpy if FW == "torch" else paddle.to_tensor
    gx, gy = fn(to(x), to(y))
    return gx.numpy(), gy.numpy()
out = {}
gx, gy = run("geometric")
out["geometric_equal"] = bool(np.array_equal(gx[:, 0], np.where(gy == 255, 0, gy)))
out["geometric_moved"] = bool((gy == 255).any() and not np.array_equal(gy, y))
out["geometric_dtype"] = str(gy.dtype)
gx, gy = run("rotation")
out["rotation_values"] = sorted(int(v) for v in np.unique(gy))
out["rotation_moved"] = bool((gy == 255).any())
inside = gy != 255
out["rotation_agrees"] = float((np.abs(gx[:, 0] - gy)[inside] < 0.5).mean())
gx, gy = run("photometric")
out["photometric_mask_kept"] = bool(np.array_equal(gy, y))
out["photometric_image_changed"] = bool(not np.allclose(gx, x))
print(json.dumps(out))
"""


def _source(framework: str, name: str, augmentation: list[dict[str, Any]]) -> str:
    text = environment(framework).get_template("_augment.py.j2").render(
        augmentation=augmentation, data_task="segmentation", data_ignore_index=255)
    return text.replace("def segment_augment(", f"def {name}(")


def script(framework: str) -> str:
    """The check's program in ``framework`` (run by tests/frameworks/shared_start.py)."""
    parts = {name: _source(framework, name, augs) for name, augs in
             (("geometric", GEOMETRIC), ("rotation", ROTATION), ("photometric", PHOTOMETRIC))}
    script = HEADER[framework] + f"import json\nFW = {framework!r}\nnamespace = {{}}\n"
    for name, text in parts.items():
        script += f"exec(compile({(HEADER[framework] + text)!r}, {name!r}, 'exec'), namespace)\n"
    script += CHECK
    if framework != "keras":
        script = script.replace("SEED = 0\n", "SEED = 0\n" + ("torch.manual_seed(0)\n" if framework == "torch"
                                                             else "paddle.seed(0)\n"), 1)
    return script


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_crop_flip_and_rotation_move_image_and_mask_alike_and_colour_the_image_only(framework: str) -> None:
    out = findings(__name__, framework)
    assert out["geometric_equal"] and out["geometric_moved"] and out["geometric_dtype"] == "int64", out
    assert set(out["rotation_values"]) <= {0, 1, 2, 3, 255} and out["rotation_moved"], out
    assert out["rotation_agrees"] > 0.8, out  # the image's value channel follows its mask, bar region edges
    assert out["photometric_mask_kept"] and out["photometric_image_changed"], out
