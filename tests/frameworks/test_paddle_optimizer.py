"""The paddle program's Adam and AdamW take torch's steps (issue 22): fed the same gradients, the
generated ``TorchAdamW`` (and ``TorchAdam`` with an L2 weight_decay) end where torch's optimizer ends,
to float32 rounding (5e-8 of the distance the weights moved). Paddle's own AdamW, whose kernel multiplies
β1ᵗ and β2ᵗ up in float32, ends 4.2e-6 of it away in this test (the cause of paddle's 1e-2 lockstep drift
on the mlp template after 50 steps). On the CPU the update runs in numpy on the tensors' memory (for speed):
bit for bit paddle's operations, which a GPU runs, and a resumed run bit for bit an uninterrupted one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from core.codegen import generate
from core.spec import PipelineSpec

pytestmark = pytest.mark.frameworks

SCRIPT = r'''
import json, sys
import numpy as np
import paddle, torch
from optim import *  # TorchAdam or TorchAdamW
name = sys.argv[1]
paddle.set_device("cpu")
rng = np.random.default_rng(0)
w0 = (rng.standard_normal(256) * 0.05).astype(np.float32)
grads = (rng.standard_normal((30, 256)) * 1e-3).astype(np.float32)
param = paddle.create_parameter([256], "float32")
param.set_value(w0)
decay = paddle.regularizer.L2Decay(0.01) if name == "TorchAdam" else 0.01
optimizer = globals()[name](1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=[param], weight_decay=decay)
reference = torch.tensor(w0.copy(), requires_grad=True)
torch_optimizer = (torch.optim.Adam if name == "TorchAdam" else torch.optim.AdamW)(
    [reference], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
for g in grads:
    (param * paddle.to_tensor(g)).sum().backward()
    optimizer.step()
    optimizer.clear_grad()
    reference.grad = torch.tensor(g)
    torch_optimizer.step()
w = reference.detach().numpy()
steps = [v for k, v in optimizer.state_dict().items() if k.endswith("torch_step_0")]
print(json.dumps({"error": float(np.linalg.norm(param.numpy() - w) / np.linalg.norm(w - w0)),
                  "steps": float(steps[0].numpy()[0])}))
'''


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_paddle_adam_takes_torchs_steps(optimizer: str, tmp_path: Path) -> None:
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["optimizer"] = {**doc["training"]["optimizer"], "name": optimizer, "weight_decay": 0.01}
    generate(PipelineSpec.model_validate(doc), "paddle").write(tmp_path)
    name = "TorchAdamW" if optimizer == "adamw" else "TorchAdam"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, name], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["steps"] == 30  # the step count is state, saved with the checkpoint
    # relative to how far the weights moved: float32 rounding is ~1e-7 of it, paddle's own kernel 4e-6
    assert result["error"] < 1e-6, result



EXACT_SCRIPT = r'''
import json, sys
import numpy as np
import paddle
import optim
name = sys.argv[1]
paddle.set_device("cpu")
rng = np.random.default_rng(0)
# a bias, a weight over three of the host update's pieces (the last one short) and one whose gradients are
# zero: magnitudes from 1e-30 to 1, so g·g and v reach float32's subnormals and underflow to zero
shapes = [[7], [3, optim.CHUNK - 5], [4, 4]]
w0 = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
grads = [[(rng.standard_normal(s) * 10.0 ** rng.uniform(-30, 0, s)).astype(np.float32) * (i != 2)
          for i, s in enumerate(shapes)] for _ in range(12)]


def optimizer_for(params):
    decay = paddle.regularizer.L2Decay(0.01) if name == "TorchAdam" else 0.01
    return getattr(optim, name)(1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=params, weight_decay=decay)


def move(tensor, keep):
    """The tensor's values into new memory (as a set_value that allocates anew); the old memory is kept alive in
    `keep`, so that the new memory cannot be at the old address."""
    values, dense = tensor.numpy(), tensor.get_tensor()
    keep.append(np.from_dlpack(tensor.detach()))
    dense._clear()
    dense.set(values, paddle.CPUPlace())


def train(steps, params=None, state=None, move_at=None):
    """(weights, optimizer state) after `steps` of the gradients, from w0 or from (params, state); names
    counted afresh, as in a new process (the state's keys are its accumulators' names); before step `move_at`
    every weight and optimizer state tensor moves to new memory"""
    with paddle.utils.unique_name.guard():
        if params is None:
            params = [paddle.create_parameter(list(w.shape), "float32") for w in w0]
            for p, w in zip(params, w0):
                p.set_value(w)
        optimizer = optimizer_for(params)
        if state is not None:
            optimizer.set_state_dict({k: paddle.to_tensor(v) for k, v in state.items()})
        for i, g in enumerate(steps):
            if i == move_at:
                moved = params + [t for accumulator in optimizer._accumulators.values() for t in accumulator.values()]
                addresses = [t.data_ptr() for t in moved]
                old = []
                for t in moved:
                    move(t, old)
                assert all(t.data_ptr() != a for t, a in zip(moved, addresses))
            paddle.add_n([(p * paddle.to_tensor(x)).sum() for p, x in zip(params, g)]).backward()
            optimizer.step()
            optimizer.clear_grad(set_to_zero=False)
        return params, {k: v.numpy() for k, v in optimizer.state_dict().items() if isinstance(v, paddle.Tensor)}


def bits(arrays):
    return [a.view(np.int32) for a in arrays]


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(bits(a), bits(b)))


on_host = optim.on_host
params, state = train(grads)
optim.on_host = lambda *tensors: False  # paddle's operations, the update the GPU takes
params_paddle, state_paddle = train(grads)
optim.on_host = on_host
# 5 steps, the state through numpy (as a checkpoint holds it), the rest in a new optimizer
first, saved = train(grads[:5])
resumed, state_resumed = train(grads[5:], params=first, state=saved)
moved, state_moved = train(grads, move_at=5)
print(json.dumps({
    "host_is_paddle": same([p.numpy() for p in params], [p.numpy() for p in params_paddle])
    and sorted(state) == sorted(state_paddle) and same([state[k] for k in sorted(state)],
                                                       [state_paddle[k] for k in sorted(state)]),
    "resumed_is_uninterrupted": same([p.numpy() for p in params], [p.numpy() for p in resumed])
    and same([state[k] for k in sorted(state)], [state_resumed[k] for k in sorted(state)]),
    "moved_memory_is_followed": same([p.numpy() for p in params], [p.numpy() for p in moved])
    and same([state[k] for k in sorted(state)], [state_moved[k] for k in sorted(state)]),
    "steps": sorted({float(v[0]) for k, v in state_resumed.items() if "torch_step" in k}),
}))
'''


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_paddle_adam_on_the_cpu_takes_the_bits_of_paddles_operations(optimizer: str, tmp_path: Path) -> None:
    """On the CPU the generated optimizer updates float32 weights in numpy (optim.py says why): its weights and
    state after 12 steps are bit for bit those of the same update as paddle operations (what a GPU runs), and
    a run resumed from the state after 5 steps, its step counts included, ends bit for bit where the
    uninterrupted run ends, and so does a run whose weights and optimizer state move to new memory after 5
    steps (an update that kept its views of that memory between steps would miss the move)."""
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["optimizer"] = {**doc["training"]["optimizer"], "name": optimizer, "weight_decay": 0.01}
    generate(PipelineSpec.model_validate(doc), "paddle").write(tmp_path)
    name = "TorchAdamW" if optimizer == "adamw" else "TorchAdam"
    proc = subprocess.run([sys.executable, "-c", EXACT_SCRIPT, name], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"host_is_paddle": True, "resumed_is_uninterrupted": True, "moved_memory_is_followed": True,
                      "steps": [12.0]}, result

CLIP_SCRIPT = r'''
import json
from types import SimpleNamespace
import numpy as np
import paddle, torch
import train
paddle.set_device("cpu")
train.GRADIENT_CLIP_NORM = 1e-3
rng = np.random.default_rng(0)
w0 = rng.standard_normal(256).astype(np.float32)
g = rng.standard_normal(256)
g = (g / np.linalg.norm(g) * 2e-3).astype(np.float32)  # a gradient of norm 2e-3, clipped to 1e-3
model = paddle.nn.Layer()
model.w = model.create_parameter([256])
model.w.set_value(w0)
# train.py's Trainer and optimizer (SGD, lr 1) around a one-weight model whose loss w·g has the gradient g
trainer = train.Trainer.__new__(train.Trainer)
trainer.model, trainer.scaler = model, None
trainer.optimizer = train.make_optimizer(model)
trainer.forward = lambda x, y: ((model.w * x).sum(), None)
trainer.scheduler = SimpleNamespace(step=lambda: None)
trainer.tally = SimpleNamespace(add=lambda *args: None)
trainer.train_step(paddle.to_tensor(g), None)
reference = torch.tensor(w0, requires_grad=True)
(reference * torch.tensor(g)).sum().backward()
torch.nn.utils.clip_grad_norm_([reference], 1e-3)
w = (reference - reference.grad).detach().numpy()
print(json.dumps({"error": float(np.linalg.norm(model.w.numpy() - w) / np.linalg.norm(w - w0))}))
'''


def test_paddle_clips_the_gradient_as_torch(tmp_path: Path) -> None:
    """torch clips by max_norm / (norm + 1e-6), paddle's ClipGradByGlobalNorm by max_norm / norm: 1e-6 / norm
    relative apart, the size of float32 rounding for a norm near 1, but 5e-4 of the step for a gradient of
    norm 2e-3. The paddle program's clip_gradients (train.py) takes torch's factor."""
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["optimizer"] = {"name": "sgd", "lr": 1.0, "momentum": 0.0}
    doc["training"]["gradient_clip_norm"] = 1.0
    doc["training"]["schedule"] = {"name": "constant"}
    generate(PipelineSpec.model_validate(doc), "paddle").write(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CLIP_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["error"] < 1e-5, result  # with the optimizer's ClipGradByGlobalNorm (before): 5.8e-4
