"""Why check-training does not hold an attention's key bias to its weight bound (core/lockstep.py,
GRADIENT_FREE): in the generated torch program's transformer classifier, the loss does not depend on it.

The key bias adds q·b_k to every score of a query, the same for every key, and softmax ignores a
constant: moving it changes the outputs by float32 rounding only, and its gradient is rounding noise,
orders of magnitude below the query's and value's. Adam divides each gradient by its own running size,
so it steps such a weight by up to lr a step in the noise's direction, in any program: after 50 AdamW
steps torch's own run from start weights one ulp away ends 1.5e-3 to 1.9e-3 from torch in that part,
where the query and value parts agree to 5e-6 (docs/generated-program.md, "The zoo in lockstep")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.codegen import generate
from core.validate import validate
from core.weights import random_canonical

pytestmark = pytest.mark.frameworks

SCRIPT = r'''
import json
import numpy as np
import torch
import model
torch.manual_seed(0)
arrays = dict(np.load("start.npz"))
net = model.build_model()
model.load_canonical_weights(net, arrays)
net.train()
tokens = torch.tensor(np.random.default_rng(0).integers(1, 500, size=(8, 200)))
labels = torch.tensor(np.random.default_rng(1).integers(0, 2, size=8))
loss = torch.nn.functional.cross_entropy(net(tokens), labels)
loss.backward()
out = {}
for name, p in net.named_parameters():
    if name.endswith("in_proj_bias"):
        q, k, v = p.grad.detach().double().chunk(3)
        out[name] = {"query": float(q.norm()), "key": float(k.norm()), "value": float(v.norm())}
net.eval()
with torch.no_grad():
    before = net(tokens).double()
    for name, p in net.named_parameters():
        if name.endswith("in_proj_bias"):
            e = p.shape[0] // 3
            p[e:2 * e] += torch.linspace(-1.0, 1.0, e)  # every key bias moved by up to 1
    after = net(tokens).double()
out["outputs_moved"] = float((after - before).abs().max() / before.abs().max())
print(json.dumps(out))
'''


def test_the_loss_does_not_depend_on_an_attentions_key_bias(tmp_path: Path) -> None:
    spec = zoo.template("transformer_text_classifier")
    generate(spec, "torch").write(tmp_path)
    np.savez(tmp_path / "start.npz", **random_canonical(validate(spec), 0))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    moved = found.pop("outputs_moved")
    assert found, "no attention in the transformer classifier"
    for name, grads in found.items():
        # the query's and value's gradients carry the loss; the key's is rounding noise
        assert grads["query"] > 0 and grads["value"] > 0, (name, grads)
        assert grads["key"] < 1e-6 * min(grads["query"], grads["value"]), (name, grads)
    assert moved < 1e-5, moved  # moving every key bias by up to 1 leaves the outputs as they were
