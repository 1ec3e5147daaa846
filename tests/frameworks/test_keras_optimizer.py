"""The Keras program's Adam/AdamW step is torch's formula (issue 22): fed the same gradients, the
generated ``TorchAdam`` follows torch's AdamW computed in float64 to float32 rounding.

β2 = 0.99999 makes the bias correction's precision visible: float32 holds that β2 1e-8 off, so a
float32 power misses 1 − β2ᵗ by about 1e-3 relative and every step by half of that, where torch
computes the corrections in float64."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from core.codegen import generate

pytestmark = pytest.mark.frameworks

SCRIPT = r'''
import ast, json, sys
import numpy as np
import keras, tensorflow as tf
source = open("optim.py", encoding="utf-8").read()
cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "TorchAdam")
namespace = {"keras": keras, "tf": tf, "np": np}
exec(ast.get_source_segment(source, cls), namespace)
steps, lr, betas, eps, decay = 20, 1e-3, (0.9, 0.99999), 1e-8, 0.01
rng = np.random.default_rng(0)
w0 = (rng.standard_normal(256) * 0.05).astype(np.float32)
grads = (rng.standard_normal((steps, 256)) * 1e-3).astype(np.float32)
variable = tf.Variable(w0)
optimizer = namespace["TorchAdam"](learning_rate=lr, beta_1=betas[0], beta_2=betas[1], epsilon=eps,
                                   decoupled_decay=decay)
optimizer.build([variable])
for g in grads:
    optimizer.apply([tf.constant(g)], [variable])
w, m, v = w0.astype(np.float64), 0.0, 0.0  # torch's AdamW, in float64
for t, g in enumerate(grads.astype(np.float64), start=1):
    w = w * (1 - lr * decay)
    m, v = m + (1 - betas[0]) * (g - m), betas[1] * v + (1 - betas[1]) * g * g
    w = w - lr / (1 - betas[0] ** t) * m / (np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps)
moved = np.linalg.norm(w - w0)
print(json.dumps({"error": float(np.linalg.norm(variable.numpy() - w) / moved)}))
'''


def test_torch_adam_takes_torchs_adamw_steps(tmp_path: Path) -> None:
    doc = zoo.template("mlp").model_dump(mode="json")  # AdamW
    generate(type(zoo.template("mlp")).model_validate(doc), "keras").write(tmp_path)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    error = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
    # relative to how far the weights moved: float32 rounding is ~1e-6 of it, a float32 bias correction ~5e-4
    assert error < 2e-5, error


COMBINE_SCRIPT = r"""
import ast, json
import numpy as np
import keras, tensorflow as tf
namespace = {"keras": keras, "tf": tf, "np": np, "WEIGHT_DECAY": 0.1, "GRADIENT_CLIP_NORM": 1.0}
for module, names in (("optim.py", ("torch_copies", "TorchSGD")), ("train.py", ("combine_gradients",))):
    source = open(module, encoding="utf-8").read()
    for node in ast.parse(source).body:
        if getattr(node, "name", None) in names:
            exec(ast.get_source_segment(source, node), namespace)
combine, errors = namespace["combine_gradients"], {}
rng = np.random.default_rng(0)

# an LSTM's bias under SGD with L2 decay: Keras's one bias against torch's b_ih and b_hh, each decayed
steps, lr, momentum, decay = 20, 0.05, 0.9, 0.1
b_ih, b_hh = (rng.standard_normal((2, 16)) * 0.5).astype(np.float32)
grads = (rng.standard_normal((steps, 16)) * 1e-2).astype(np.float32)  # both get the same one (norm < 1: no clip)
lstm = keras.layers.LSTM(4)
lstm.build((None, 3, 4))
bias = next(v for v in lstm.trainable_variables if v.path.endswith("lstm_cell/bias"))
bias.assign(b_ih + b_hh)  # Keras's one bias is torch's sum
optimizer = namespace["TorchSGD"](learning_rate=lr, momentum=momentum)
optimizer.build([bias])
for g in grads:
    optimizer.apply(combine([tf.constant(g)], [bias], 1), [bias])
w, buf = np.stack([b_ih, b_hh]).astype(np.float64), 0.0
for g in grads.astype(np.float64):
    buf = momentum * buf + g + decay * w
    w = w - lr * buf
moved = np.linalg.norm(w.sum(axis=0) - (b_ih + b_hh))
errors["summed_bias"] = float(np.linalg.norm(bias.numpy() - w.sum(axis=0)) / moved)

# clipping an embedding's gradient (IndexedSlices, a slice per token) beside a dense one, at zero weights
tokens = np.array([3, 1, 3, 3, 0, 1, 3, 2])  # a batch's token ids: most of them more than once
rows = rng.standard_normal((4, 4)).astype(np.float32)[tokens]  # a token's repeats: alike, as in a real batch
dense = rng.standard_normal((5, 3)).astype(np.float32)
embedding = tf.IndexedSlices(tf.constant(rows), tf.constant(tokens), tf.constant([4, 4]))  # tf.gather's gradient
zeros = [keras.Variable(np.zeros((4, 4), np.float32)), keras.Variable(np.zeros((5, 3), np.float32))]
clipped = combine([embedding, tf.constant(dense)], zeros, 1)
summed = np.zeros((4, 4))
np.add.at(summed, tokens, rows)  # torch's clip_grad_norm_ takes the norm of the rows the weight receives
norm = np.sqrt((summed ** 2).sum() + (dense.astype(np.float64) ** 2).sum())
errors["clip"] = max(float(np.abs(tf.convert_to_tensor(g).numpy() - e).max() / np.abs(e).max())
                     for g, e in zip(clipped, [summed / norm, dense / norm]))

# the clip's factor, against torch's clip_grad_norm_ itself: max_norm / (norm + 1e-6), which a gradient of norm
# 2e-3 makes 5e-4 relative off max_norm / norm (tf.clip_by_global_norm's)
import torch
namespace["GRADIENT_CLIP_NORM"] = 1e-3
small = (dense / np.linalg.norm(dense) * 2e-3).astype(np.float32)
[clipped] = combine([tf.constant(small)], zeros[1:], 1)
reference = torch.zeros(small.shape, requires_grad=True)
reference.grad = torch.tensor(small)
torch.nn.utils.clip_grad_norm_([reference], 1e-3)
errors["clip_factor"] = float(np.abs(clipped.numpy() - reference.grad.numpy()).max() / np.abs(reference.grad.numpy()).max())
print(json.dumps(errors))
"""


def test_combine_gradients_decays_an_lstms_bias_and_clips_an_embedding_as_torch(tmp_path: Path) -> None:
    """Three of torch's gradient conventions that Keras's train.py (combine_gradients) must reproduce:

    - an LSTM's bias is torch's b_ih + b_hh; torch's SGD decays each by its own value, together by the sum's,
      and the Keras optimizer steps the sum twice as far, so it adds half the decay (it added the whole: the
      sum's decay doubled, 0.69 of its movement off torch's here);
    - an embedding's gradient arrives as IndexedSlices, one slice per token of the batch, and
      tf.clip_by_global_norm takes the norm of the slices as they are, where torch's clip_grad_norm_ takes
      the summed rows the weight receives: with a token repeated, Keras clipped by another factor (0.35 off
      here; the transformer classifier's Keras losses left torch's from the second step);
    - torch clips by max_norm / (norm + 1e-6), tf.clip_by_global_norm by max_norm / norm: 1e-6 / norm relative
      apart, the size of float32 rounding for a norm near 1, but 5e-4 for a gradient of norm 2e-3."""
    doc = zoo.template("lstm_text_classifier").model_dump(mode="json")  # an Embedding, an LSTM, clip norm 1.0
    doc["training"]["optimizer"] = {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.1}
    generate(type(zoo.template("mlp")).model_validate(doc), "keras").write(tmp_path)
    proc = subprocess.run([sys.executable, "-c", COMBINE_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    # relative: float32 rounding is ~1e-6; the doubled decay ~0.7, the slices' norm ~0.35
    assert errors["summed_bias"] < 1e-4, errors
    assert errors["clip"] < 1e-5, errors
    assert errors["clip_factor"] < 1e-6, errors  # tf.clip_by_global_norm: 5e-4
