"""CPU time of one optimizer step of the generated paddle program's TorchAdam / TorchAdamW against paddle's own fused
Adam / AdamW, on the parameters of the bench's U-Net (bench/paddle_speed.py's unet_small: 46 arrays, 1,941,156
weights) or, with ``--network mlp``, of its MLP (bench/reference/paddle_mlp.py: 6 arrays, 669,706 weights).

    nice -n 10 .venv/bin/python bench/paddle_optimizer.py [--rounds 25] [--optimizers adam adamw] [--network mlp]

Three optimizers per row, stepped in turn on the same gradients (one backward pass of a loss whose gradient is a
fixed random array each) for ``--rounds`` rounds after 3 of warm-up, one paddle thread: paddle's fused kernel
(not torch's arithmetic: templates/paddle/optim.py.j2 says why), the generated optimizer as shipped (on the CPU,
paddle's own kernel handed torch's bias corrections), and the generated optimizer's paddle-operations path (what a
GPU runs; on the CPU, about what every paddle program ran before issue 23). Each cell: the fastest and the median step, CPU ms
(process time, so other processes move it less than the wall clock, but a loaded machine's shared caches still do:
the fastest is the steadier figure).

A second table puts the optimizer in its training step: the reference U-Net's step (bench/reference/paddle_unet.py:
its network, its pair flip, forward and loss under ``paddle.jit.to_static``, batch 8 of 3×64×64 random images;
with ``--network mlp`` the reference MLP's, batch 64 of 1×28×28 random images) with each of the three
optimizers, three models in one process, ``--windows`` rounds of 6 steps after one of warm-up, taken in turn (so
the machine's load falls on all three alike): CPU ms per step, median over the rounds, and paddle's fused
optimizer's step time ÷ each (what bench/paddle_speed.py's per-CPU-second ratio would be if the optimizer were
the only difference; docs/performance.md shows it is, for both networks).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

os.environ.setdefault("FLAGS_paddle_num_threads", "1")
os.environ.setdefault("GLOG_minloglevel", "2")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.nn import functional as F  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "reference"))

from paddle_mlp import build as build_mlp  # noqa: E402
from paddle_unet import UNet, flip_pair  # noqa: E402
from torch_speed import UNET_SMALL_BASE  # noqa: E402

from core import zoo  # noqa: E402
from core.codegen import generate  # noqa: E402
from core.spec import PipelineSpec  # noqa: E402


def generated_optim(optimizer: str, folder: Path) -> ModuleType:
    """The generated program's optim.py for `optimizer` (the mlp template's, the module is the same for every
    pipeline), imported."""
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["optimizer"] = {**doc["training"]["optimizer"], "name": optimizer}
    generate(PipelineSpec.model_validate(doc), "paddle").write(folder / optimizer)
    spec = importlib.util.spec_from_file_location(f"optim_{optimizer}", folder / optimizer / "optim.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(network: str) -> paddle.nn.Layer:
    """The reference's network: "unet_small" or "mlp"."""
    return UNet(UNET_SMALL_BASE) if network == "unet_small" else build_mlp()


def batch(network: str) -> tuple[paddle.Tensor, paddle.Tensor]:
    """A random batch of the network's bench case (bench/paddle_speed.py's batch size)."""
    rng = np.random.default_rng(0)
    if network == "unet_small":
        return (paddle.to_tensor(rng.random((8, 3, 64, 64), dtype=np.float32)),
                paddle.to_tensor(rng.integers(0, 4, (8, 64, 64))))
    return paddle.to_tensor(rng.random((64, 1, 28, 28), dtype=np.float32)), paddle.to_tensor(rng.integers(0, 10, 64))


def measure(optimizer: str, rounds: int, folder: Path, network: str) -> dict[str, list[float]]:
    """CPU ms of each measured step, per optimizer."""
    optim = generated_optim(optimizer, folder)
    generated = optim.TorchAdamW if optimizer == "adamw" else optim.TorchAdam
    fused = paddle.optimizer.AdamW if optimizer == "adamw" else paddle.optimizer.Adam
    shapes = [p.shape for p in build(network).parameters()]
    rng = np.random.default_rng(0)
    gradients = [paddle.to_tensor((rng.standard_normal(s) * 1e-3).astype(np.float32)) for s in shapes]
    decay = {"weight_decay": 0.01} if optimizer == "adamw" else {}
    on_host = optim.on_host
    runs = {}
    for name, cls, host in (("paddle's fused", fused, True), ("generated", generated, True),
                            ("generated, paddle ops", generated, False)):
        params = [paddle.create_parameter(s, "float32") for s in shapes]
        runs[name] = (params, cls(1e-3, parameters=params, epsilon=1e-8, **decay), host)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(3 + rounds):
        for name, (params, opt, host) in runs.items():
            paddle.add_n([(p * g).sum() for p, g in zip(params, gradients)]).backward()
            optim.on_host = on_host if host else (lambda *tensors: False)
            start = time.process_time()
            opt.step()
            elapsed = time.process_time() - start
            opt.clear_grad(set_to_zero=False)
            if round_ >= 3:
                times[name].append(elapsed * 1e3)
    optim.on_host = on_host
    return times


def compiled_loss(model: paddle.nn.Layer, network: str) -> Callable[[paddle.Tensor, paddle.Tensor], paddle.Tensor]:
    """The model's forward pass and cross-entropy (per pixel for the U-Net) as one static graph (as the reference
    compiles it)."""
    axis = 1 if network == "unet_small" else -1

    @paddle.jit.to_static(full_graph=True)
    def forward_loss(x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
        return F.cross_entropy(model(x), y, axis=axis)

    return forward_loss


def step_times(optimizer: str, windows: int, folder: Path, network: str) -> dict[str, list[float]]:
    """CPU ms per training step of the reference network, one entry per window of 6 steps, per optimizer."""
    optim = generated_optim(optimizer, folder)
    generated = optim.TorchAdamW if optimizer == "adamw" else optim.TorchAdam
    fused = paddle.optimizer.AdamW if optimizer == "adamw" else paddle.optimizer.Adam
    x, y = batch(network)
    augment = flip_pair if network == "unet_small" else (lambda x, y: (x, y))
    decay = {"weight_decay": 0.01} if optimizer == "adamw" else {}
    on_host = optim.on_host
    runs = {}
    for name, cls, host in (("paddle's fused", fused, True), ("generated", generated, True),
                            ("generated, paddle ops", generated, False)):
        paddle.seed(0)
        model = build(network)
        opt = cls(1e-3, parameters=model.parameters(), epsilon=1e-8, **decay)
        runs[name] = (opt, compiled_loss(model, network), host)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for window in range(1 + windows):
        for name, (opt, forward, host) in runs.items():
            optim.on_host = on_host if host else (lambda *tensors: False)
            start = time.process_time()
            for _ in range(6):
                loss = forward(*augment(x, y))
                loss.backward()
                opt.step()
                opt.clear_grad(set_to_zero=False)
            float(loss)
            if window >= 1:
                times[name].append((time.process_time() - start) / 6 * 1e3)
    optim.on_host = on_host
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--optimizers", nargs="+", default=["adam", "adamw"], choices=["adam", "adamw"])
    parser.add_argument("--windows", type=int, default=8, help="rounds of 6 training steps (second table)")
    parser.add_argument("--network", default="unet_small", choices=["unet_small", "mlp"],
                        help="whose parameters and training step (default unet_small)")
    args = parser.parse_args()
    paddle.set_device("cpu")
    print(f"{args.network}; load average {os.getloadavg()[0]:.1f}; CPU ms per optimizer step, fastest / median of "
          f"{args.rounds}")
    print("| optimizer | paddle's fused | generated | generated, paddle ops | fused ÷ generated |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="flowtrain-paddle-optimizer-") as tmp:
        for optimizer in args.optimizers:
            times = measure(optimizer, args.rounds, Path(tmp), args.network)
            cells = [f"{min(t):.2f} / {statistics.median(t):.2f}" for t in times.values()]
            fused, generated = (min(times[k]) for k in ("paddle's fused", "generated"))
            print(f"| {optimizer} | {' | '.join(cells)} | {fused / generated:.2f} |", flush=True)
        print(f"\nload average {os.getloadavg()[0]:.1f}; the reference {args.network}'s training step, CPU ms, median of "
              f"{args.windows} windows of 6 steps (fused ÷ it)")
        print("| optimizer | paddle's fused | generated | generated, paddle ops |")
        print("|---|---:|---:|---:|")
        for optimizer in args.optimizers:
            times = step_times(optimizer, args.windows, Path(tmp), args.network)
            fused = statistics.median(times["paddle's fused"])
            cells = [f"{statistics.median(t):.2f} ({fused / statistics.median(t):.3f})" for t in times.values()]
            print(f"| {optimizer} | {' | '.join(cells)} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
