"""The training loop of the hand-written PyTorch reference programs (bench/reference/torch_*.py).

What an expert writes for throughput, per device:
- data: the whole (preprocessed) training split on the device, batches sliced there;
- no host synchronisation per step: the loss is summed on the device and read every `--log-every` steps;
- fused optimizers; on a GPU also bf16 autocast, channels_last for conv nets and torch.compile.

Prints one JSON line per logging interval: {"step", "loss", "samples_per_s"} (the same measurement the
generated program writes to metrics.jsonl).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def parse_args(description: str, extra: tuple[tuple[str, type, object], ...] = ()) -> argparse.Namespace:
    """The arguments every reference takes, and ``extra`` (flag, type, default) of its own."""
    parser = argparse.ArgumentParser(description=description)
    for flag, kind, default in extra:
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--data", required=True, help=".npz with the preprocessed training split: x, y")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--log-every", type=int, required=True)
    parser.add_argument("--compile", choices=("auto", "on", "off"), default="auto")
    return parser.parse_args()


def device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def train(model: nn.Module, optimizer_fn: Callable[[nn.Module], torch.optim.Optimizer], args: argparse.Namespace,
          schedule: Callable[[int], float] | None = None,
          augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
          augment_pair: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
          loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
          clip_norm: float | None = None) -> None:
    """augment: the images only; augment_pair: images and their per-pixel targets alike (segmentation);
    loss_fn(output, target) (cross-entropy over dimension 1 by default); clip_norm: the gradients' global norm."""
    dev = device()
    cuda = dev.type == "cuda"
    if not cuda and "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    with np.load(args.data) as data:
        x = torch.from_numpy(data["x"]).to(dev)
        y = torch.from_numpy(data["y"]).to(dev)
    conv = x.dim() == 4
    memory_format = torch.channels_last if cuda and conv else torch.contiguous_format
    x = x.contiguous(memory_format=memory_format)
    model = model.to(dev, memory_format=memory_format)
    optimizer = optimizer_fn(model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule) if schedule else None
    net = torch.compile(model) if args.compile == "on" or (args.compile == "auto" and cuda) else model
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else nullcontext
    n, batch = len(x), args.batch
    order, position = torch.randperm(n, device=dev), 0
    loss_sum = torch.zeros((), device=dev)
    last = time.perf_counter()
    for step in range(1, args.steps + 1):
        if position + batch > n:
            order, position = torch.randperm(n, device=dev), 0
        index = order[position:position + batch]
        position += batch
        xb, yb = x[index], y[index]
        if augment is not None:
            xb = augment(xb)
        if augment_pair is not None:
            xb, yb = augment_pair(xb, yb)
        with autocast():
            output = net(xb)
        loss = loss_fn(output.float(), yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        loss_sum += loss.detach()
        if step % args.log_every == 0:
            mean = loss_sum.item() / args.log_every
            now = time.perf_counter()
            print(json.dumps({"step": step, "loss": mean, "samples_per_s": batch * args.log_every / (now - last)}),
                  flush=True)
            loss_sum.zero_()
            last = now


def cosine(total_steps: int, lr: float, min_lr: float = 0.0) -> Callable[[int], float]:
    def factor(step: int) -> float:
        progress = min(step / total_steps, 1.0)
        return (min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))) / lr

    return factor


def uniform_init(model: nn.Module) -> nn.Module:
    """U(±1/√fan_in) for weights and biases (what torch's defaults amount to, set explicitly)."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            bound = 1 / math.sqrt(m.weight[0].numel())
            nn.init.uniform_(m.weight, -bound, bound)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -bound, bound)
    return model
