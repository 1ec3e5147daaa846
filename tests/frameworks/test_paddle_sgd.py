"""The paddle program's SGD takes torch's steps (issue 22): paddle's Momentum with an L2 weight decay and the
program's learning-rate schedule (a LambdaDecay over the shared formula, stepped after every optimizer step),
fed the same gradients as torch's fused SGD with the same momentum, decay and LambdaLR, ends where torch's
ends, to float32 rounding. This is the optimizer part of mnist_cnn's SGD lockstep row (docs/generated-program.md,
"The zoo in lockstep"): what is left there is the forward and backward passes' rounding."""

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
import train
from runtime import Plan
paddle.set_device("cpu")
plan = Plan(epochs=12, steps_per_epoch=23)  # mnist_cnn's on the digits: 1,437 samples in batches of 64
rng = np.random.default_rng(0)
shapes = [(64, 32), (64,), (10, 64)]
w0 = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
grads = [[(rng.standard_normal(s) * 1e-2).astype(np.float32) for s in shapes] for _ in range(50)]
model = paddle.nn.Layer()
params = [model.create_parameter(list(s)) for s in shapes]
for i, (p, w) in enumerate(zip(params, w0)):
    p.set_value(w)
    setattr(model, f"w{i}", p)
scheduler = train.make_scheduler(plan)
optimizer = train.make_optimizer(model, scheduler)
references = [torch.tensor(w.copy(), requires_grad=True) for w in w0]
opt = json.loads(sys.argv[1])
torch_optimizer = torch.optim.SGD(references, lr=train.LR, momentum=opt["momentum"], nesterov=opt["nesterov"],
                                  weight_decay=opt["weight_decay"], fused=True)
torch_scheduler = torch.optim.lr_scheduler.LambdaLR(torch_optimizer, lambda step: train.lr_factor(step, plan))
for step in grads:
    paddle.add_n([(p * paddle.to_tensor(g)).sum() for p, g in zip(params, step)]).backward()
    optimizer.step()
    optimizer.clear_grad()
    scheduler.step()
    for r, g in zip(references, step):
        r.grad = torch.tensor(g)
    torch_optimizer.step()
    torch_scheduler.step()
errors = [float(np.linalg.norm(p.numpy() - r.detach().numpy()) / np.linalg.norm(r.detach().numpy() - w))
          for p, r, w in zip(params, references, w0)]
print(json.dumps({"error": max(errors), "lr": [optimizer.get_lr(), torch_optimizer.param_groups[0]["lr"]]}))
'''


@pytest.mark.parametrize("nesterov", [False, True])
def test_paddle_sgd_takes_torchs_steps(nesterov: bool, tmp_path: Path) -> None:
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    optimizer = {"name": "sgd", "lr": 0.01, "momentum": 0.9, "nesterov": nesterov, "weight_decay": 5e-4}
    doc["training"]["optimizer"] = optimizer
    generate(PipelineSpec.model_validate(doc), "paddle").write(tmp_path)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(optimizer)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"CUDA_VISIBLE_DEVICES": "", "GLOG_minloglevel": "2", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    lr_paddle, lr_torch = result["lr"]
    assert abs(lr_paddle - lr_torch) <= 1e-12 * lr_torch, result  # the same schedule, stepped as often
    # relative to how far the weights moved over 50 steps: float32 rounding is ~1e-7 of it
    assert result["error"] < 1e-6, result
