"""The training loop every hand-written PaddlePaddle reference shares: what an expert writes for
small in-memory data on a CPU (performance.md's tuned recipe).

- CPU threads set from the machine (paddle runs one thread unless told; FLAGS_paddle_num_threads in
  the environment wins);
- the whole training split as tensors in memory; each batch gathered with ``index_select``;
- forward + loss compiled with ``paddle.jit.to_static(full_graph=True)``, with oneDNN kernels
  when asked (``--onednn``);
- no per-step host synchronisation: the clock is read after a sync every ``--window`` steps (the
  generated program synchronises as often, to log its metrics).

Prints one JSON line: {"samples_per_s": … (all measured steps), "windows": [samples/s per window], …}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import numpy as np
import paddle
from paddle.nn import functional as F


def parse_args(extra: tuple[tuple[str, type, object], ...] = ()) -> argparse.Namespace:
    """The arguments every reference takes, and ``extra`` (flag, type, default) of its own."""
    parser = argparse.ArgumentParser()
    for flag, kind, default in extra:
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--data", required=True, help="npz with train_x, train_y")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--window", type=int, default=5, help="steps between host synchronisations")
    parser.add_argument("--onednn", action="store_true")
    return parser.parse_args()


def run(build: Callable[[], paddle.nn.Layer], make_optimizer: Callable[[paddle.nn.Layer], paddle.optimizer.Optimizer],
        args: argparse.Namespace, loss_fn: Callable[[paddle.Tensor, paddle.Tensor], paddle.Tensor] = F.cross_entropy,
        augment_pair: Callable[[paddle.Tensor, paddle.Tensor], tuple[paddle.Tensor, paddle.Tensor]] | None = None) -> None:
    """loss_fn(output, target): cross-entropy by default; augment_pair: images and their per-pixel targets
    alike (segmentation), eagerly on each gathered batch before the compiled forward pass."""
    if "FLAGS_paddle_num_threads" not in os.environ:  # paddle uses one thread unless told
        paddle.set_flags({"FLAGS_paddle_num_threads": len(os.sched_getaffinity(0))})
    if args.onednn:
        paddle.set_flags({"FLAGS_use_mkldnn": True})
    paddle.seed(0)
    model = build()
    optimizer = make_optimizer(model)
    with np.load(args.data) as data:
        x_all, y_all = paddle.to_tensor(data["train_x"]), paddle.to_tensor(data["train_y"])
    n = len(y_all)

    @paddle.jit.to_static(full_graph=True)
    def forward_loss(x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
        return loss_fn(model(x), y)

    rng = np.random.default_rng(0)
    order = np.concatenate([rng.permutation(n) for _ in range(-(-(args.warmup + args.steps) * args.batch // n))])
    def train_step(step: int) -> paddle.Tensor:
        index = paddle.to_tensor(order[step * args.batch:(step + 1) * args.batch])
        x, y = paddle.index_select(x_all, index), paddle.index_select(y_all, index)
        if augment_pair is not None:
            x, y = augment_pair(x, y)
        loss = forward_loss(x, y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad(set_to_zero=False)
        return loss

    model.train()
    for step in range(args.warmup):
        loss = train_step(step)
    float(loss)  # sync: everything before is warm-up
    start = time.perf_counter()
    windows = []  # samples/s of each window of `--window` steps, between two host synchronisations
    clock = start
    for step in range(args.warmup, args.warmup + args.steps):
        loss = train_step(step)
        if (step + 1 - args.warmup) % args.window == 0:
            float(loss)
            now = time.perf_counter()
            windows.append(args.window * args.batch / (now - clock))
            clock = now
    elapsed = time.perf_counter() - start
    print(json.dumps({"samples_per_s": args.steps * args.batch / elapsed, "windows": windows, "steps": args.steps,
                      "batch": args.batch}))
