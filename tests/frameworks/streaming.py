"""Helpers of the streaming tests: image folders of random JPEGs, a small image network, running a
generated program, and the peak memory of a process tree (sampled in a thread)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from core.codegen import generate
from core.spec import PipelineSpec

PYTHON = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
FRAMEWORKS = ("torch", "keras", "paddle")


def random_jpegs(count: int, size: int, seed: int = 0) -> list[bytes]:
    """``count`` random size × size RGB images, JPEG-encoded (quality 95)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    encoded = []
    for _ in range(count):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (size, size, 3), np.uint8)).save(buffer, "JPEG", quality=95)
        encoded.append(buffer.getvalue())
    return encoded


def write_jpegs(root: Path, classes: int, per_class: int, size: int, distinct: int = 32, seed: int = 0) -> int:
    """``classes`` folders of ``per_class`` random JPEGs (size × size RGB); the bytes on disk.

    Only ``distinct`` images are encoded (encoding is the slow part); the files cycle through them.
    """
    encoded = random_jpegs(distinct, size, seed)
    total = 0
    width = len(str(classes - 1))
    for c in range(classes):
        folder = root / f"class{c:0{width}d}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            data = encoded[(c * per_class + i) % distinct]
            (folder / f"img{i:05d}.jpg").write_bytes(data)
            total += len(data)
    return total


def small_cnn(source: Path, classes: int, side: int, framework: str, data: dict[str, Any] | None = None,
              training: dict[str, Any] | None = None) -> PipelineSpec:
    """A strided convolution, global pooling and a Linear layer over 3 × side × side images."""
    nodes = [{"id": "in", "op": "Input", "params": {"shape": [3, side, side]}},
             {"id": "conv", "op": "Conv2d", "params": {"out_channels": 8, "kernel_size": 8, "stride": 8}},
             {"id": "relu", "op": "ReLU"}, {"id": "pool", "op": "GlobalAvgPool"},
             {"id": "fc", "op": "Linear", "params": {"out_features": classes}}, {"id": "out", "op": "Output"}]
    edges = [{"source": a["id"], "target": b["id"]} for a, b in zip(nodes, nodes[1:])]
    doc = {"name": "streaming", "data": {
        "source": str(source), "format": "image_folder", "num_classes": classes, "input_shape": [3, side, side],
        "batch_size": 16, "validation_split": 0.0, "loading": "stream", "num_workers": 2,
        "preprocessing": [{"op": "resize", "size": [side, side]}, {"op": "scale"}, {"op": "normalize"}],
        "augmentation": [{"op": "horizontal_flip", "p": 0.5}], **(data or {})},
        "model": {"nodes": nodes, "edges": edges},
        "training": {"framework": framework, "epochs": 1, "log_every_steps": 2,
                     "checkpoint": {"every_epoch": False, "every_steps": None}, **(training or {})}}
    return PipelineSpec.model_validate(doc)


def write_program(spec: PipelineSpec, framework: str, folder: Path) -> Path:
    generate(spec, framework).write(folder)
    return folder


def run(folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "train.py", *args], cwd=folder, env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False)


def pss(pid: int) -> int:
    """Proportional set size of a process in bytes (Linux's smaps_rollup: one short read, unlike psutil's
    full smaps parse, which takes tens of milliseconds for a process that has imported a framework)."""
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no Pss line in /proc/{pid}/smaps_rollup")


def tree_memory(process: psutil.Process) -> int:
    """Proportional set size (shared pages split between the processes that map them) of a process
    and its children: forked loader workers are not counted twice for the pages they share."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += pss(member.pid)
        except (FileNotFoundError, ProcessLookupError):
            continue  # a worker that ended between the listing and the reading holds no memory
    return total


class PeakMemory:
    """Runs a command and samples its process tree's memory every `interval` seconds in a thread."""

    def __init__(self, command: list[str], cwd: Path, interval: float = 0.1) -> None:
        self.popen = subprocess.Popen(command, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
        self.process = psutil.Process(self.popen.pid)
        self.peak = 0
        self.samples = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, args=(interval,), daemon=True)
        self.thread.start()

    def sample(self, interval: float) -> None:
        while not self.done.is_set():
            try:
                self.peak = max(self.peak, tree_memory(self.process))
                self.samples += 1
            except psutil.NoSuchProcess:
                return  # the program has ended
            self.done.wait(interval)

    def wait(self, timeout: float) -> tuple[int, str, str]:
        try:
            out, err = self.popen.communicate(timeout=timeout)
        finally:
            self.done.set()
            self.thread.join()
            if self.popen.poll() is None:
                self.popen.kill()
        return self.popen.returncode, out, err
