"""The paddle program's Adam and AdamW take torch's steps (issue 22): fed the same gradients, the
generated ``TorchAdamW`` (and ``TorchAdam`` with an L2 weight_decay) end where torch's fused CPU optimizer (the
torch program's) ends, to float32 rounding (4e-7 of the distance the weights moved), both on the CPU, where
paddle's own kernel takes the step handed torch's bias corrections, and in the paddle operations a GPU runs.
Paddle's own AdamW, whose kernel multiplies β1ᵗ and β2ᵗ up in float32, ends 4e-6 of it away in this test (the
cause of paddle's 1e-2 lockstep drift on the mlp template after 50 steps). A resumed run ends bit for bit where
an uninterrupted one ends."""

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
import optim
name = sys.argv[1]
paddle.set_device("cpu")
rng = np.random.default_rng(0)
# gradients from 1e-6 to 1e-2 in size, a weight's the same size from step to step, as in training
w0 = (rng.standard_normal(4099) * 0.05).astype(np.float32)
grads = (rng.standard_normal((30, 4099)) * 1e-3 * 10.0 ** rng.uniform(-3, 1, 4099)).astype(np.float32)
reference = torch.tensor(w0.copy(), requires_grad=True)
torch_optimizer = (torch.optim.Adam if name == "TorchAdam" else torch.optim.AdamW)(
    [reference], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=True)
for g in grads:
    reference.grad = torch.tensor(g)
    torch_optimizer.step()
w = reference.detach().numpy()


def error(make, on_host=None):
    """How far from torch's weights the weights end after the 30 steps, relative to how far torch's moved (with
    optim.on_host replaced by `on_host` where given)."""
    keep = optim.on_host
    optim.on_host = on_host or keep
    param = paddle.create_parameter([w0.size], "float32")
    param.set_value(w0)
    decay = paddle.regularizer.L2Decay(0.01) if name == "TorchAdam" else 0.01
    optimizer = make(1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=[param], weight_decay=decay)
    for g in grads:
        (param * paddle.to_tensor(g)).sum().backward()
        optimizer.step()
        optimizer.clear_grad()
    optim.on_host = keep
    return float(np.linalg.norm(param.numpy() - w) / np.linalg.norm(w - w0)), optimizer


host, optimizer = error(getattr(optim, name))
steps = [v for k, v in optimizer.state_dict().items() if k.endswith("torch_step_0")]
print(json.dumps({"host": host, "steps": float(steps[0].numpy()[0]),
                  "operations": error(getattr(optim, name), lambda *tensors: False)[0],
                  "paddles_own": error(getattr(paddle.optimizer, name.removeprefix("Torch")))[0]}))
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
    # relative to how far the weights moved: float32 rounding is ~1e-7 of it
    assert result["host"] < 1e-6 and result["operations"] < 1e-6, result
    if optimizer == "adamw":  # the bound tells paddle's corrections from torch's (Adam's L2 term, 5e-4 a step
        assert result["paddles_own"] > 2e-6, result  # and as large as the gradients, leaves them 5e-7 apart)



EXACT_SCRIPT = r'''
import json, sys
import numpy as np
import paddle
import optim
name = sys.argv[1]
paddle.set_device("cpu")
rng = np.random.default_rng(0)
# a bias, a weight over several of the kernel's 512-weight pieces (the last one short) and one whose gradients
# are zero: magnitudes from 1e-30 to 1, so g·g and v reach float32's subnormals and underflow to zero
shapes = [[7], [3, 20011], [4, 4]]
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


params, state = train(grads)
# 5 steps, the state through numpy (as a checkpoint holds it), the rest in a new optimizer
first, saved = train(grads[:5])
resumed, state_resumed = train(grads[5:], params=first, state=saved)
moved, state_moved = train(grads, move_at=5)
print(json.dumps({
    "resumed_is_uninterrupted": same([p.numpy() for p in params], [p.numpy() for p in resumed])
    and same([state[k] for k in sorted(state)], [state_resumed[k] for k in sorted(state)]),
    "moved_memory_is_followed": same([p.numpy() for p in params], [p.numpy() for p in moved])
    and same([state[k] for k in sorted(state)], [state_moved[k] for k in sorted(state)]),
    "steps": sorted({float(v[0]) for k, v in state_resumed.items() if "torch_step" in k}),
}))
'''


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_paddle_adam_on_the_cpu_resumes_bit_for_bit(optimizer: str, tmp_path: Path) -> None:
    """On the CPU paddle's kernel takes the generated optimizer's steps, handed torch's bias corrections from the
    step counts (optim.py says why): a run resumed from the state after 5 of 12 steps, its step counts included,
    ends bit for bit where the uninterrupted run ends (a count that restarted at 0 would not), and so does a run
    whose weights and optimizer state move to new memory after 5 steps."""
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["optimizer"] = {**doc["training"]["optimizer"], "name": optimizer, "weight_decay": 0.01}
    generate(PipelineSpec.model_validate(doc), "paddle").write(tmp_path)
    name = "TorchAdamW" if optimizer == "adamw" else "TorchAdam"
    proc = subprocess.run([sys.executable, "-c", EXACT_SCRIPT, name], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"resumed_is_uninterrupted": True, "moved_memory_is_followed": True,
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
