"""The training loop of the hand-written Keras reference programs (bench/reference/keras_*.py).

What an expert writes for throughput with Keras 3 on TensorFlow: ``model.fit`` on a ``tf.data``
pipeline built from the in-memory arrays (cache, shuffle, batch, parallel augmentation map,
prefetch), channels-last images, ``jit_compile="auto"`` (XLA only where a GPU is present; on a CPU
it is several times slower) and mixed bfloat16 on a GPU.

Prints one JSON line per logging interval: {"step", "loss", "samples_per_s"} (the same measurement the
generated program writes to metrics.jsonl).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf


def parse_args(description: str, extra: tuple[tuple[str, type, object], ...] = ()) -> argparse.Namespace:
    """The arguments every reference takes, and ``extra`` (flag, type, default) of its own."""
    parser = argparse.ArgumentParser(description=description)
    for flag, kind, default in extra:
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--data", required=True, help=".npz with the preprocessed training split: x, y")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--log-every", type=int, required=True)
    parser.add_argument("--steps-per-execution", type=int, default=1)
    return parser.parse_args()


class Throughput(keras.callbacks.Callback):
    """Samples/s and mean loss of every `every` steps (the loss is read once per interval)."""

    def __init__(self, batch: int, every: int) -> None:
        super().__init__()
        self.batch, self.every = batch, every
        self.last = time.perf_counter()

    def on_train_batch_end(self, step: int, logs: dict | None = None) -> None:
        if (step + 1) % self.every:
            return
        now = time.perf_counter()
        rate = self.batch * self.every / (now - self.last)
        print(json.dumps({"step": step + 1, "loss": float((logs or {}).get("loss", float("nan"))),
                          "samples_per_s": rate}), flush=True)
        self.last = now


def train(build: Callable[[tuple[int, ...]], keras.Model], optimizer: keras.optimizers.Optimizer,
          args: argparse.Namespace, augment: Callable | None = None) -> None:
    if tf.config.list_physical_devices("GPU"):
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    with np.load(args.data) as data:
        x, y = data["x"], data["y"]
    if x.ndim == 4:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # channels-last, once
    model = build(x.shape[1:])
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile="auto", steps_per_execution=args.steps_per_execution)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(len(x), seed=0).repeat()
    if augment is not None:
        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(args.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    model.fit(ds, epochs=1, steps_per_epoch=args.steps, verbose=0, callbacks=[Throughput(args.batch, args.log_every)])


def cosine(steps: int, lr: float) -> keras.optimizers.schedules.LearningRateSchedule:
    return keras.optimizers.schedules.CosineDecay(lr, steps)
