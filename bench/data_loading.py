"""Streamed image-folder loading: samples/s of each generated program's loader against a hand-written
torch pipeline on the same folder, with the same workers, transforms and batch size.

    .venv/bin/python bench/data_loading.py [--images 2000] [--side 256] [--input 224] [--batch 32]
                                           [--workers 2] [--batches 40] [--repeat 3]

Writes ``--images`` random side × side JPEGs into 10 class folders (a temporary folder), generates
the torch, keras and paddle programs of one pipeline that streams it (``data.loading = "stream"``:
resize to input × input, scale, normalize with given mean/std), and in one subprocess per loader
reads ``--batches`` training batches through the program's own data path (torch and paddle: their
``LoaderBatches`` over DataLoader workers; keras: ``Batches.dataset``, the tf.data pipeline), after
two warm-up batches. The reference is what one writes by hand with torchvision's ImageFolder: a
Dataset whose ``__getitem__`` opens one file with PIL, converts to RGB, resizes (bilinear) and
normalises, batched by a shuffling ``torch.utils.data.DataLoader`` with the same workers and the
default collate (torchvision itself is not in the project's environment; its ImageFolder does the
same PIL calls). The loaders take turns ``--repeat`` times (A B C D A B C D …); the table shows each
one's median samples/s and ratio = median / the reference's median. The page cache is warm for all of
them (one read of the folder first).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.codegen import generate  # noqa: E402
from core.spec import PipelineSpec  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
REFERENCE_NAME = "reference (hand-written ImageFolder + DataLoader)"

PROGRAM_DRIVER = r"""
import json, sys, time
import numpy as np
sys.argv = ["train.py"]
import data
import devices
framework, batches, workers = sys.argv_bench
splits = data.load_splits()
split = splits["train"]
n = len(split)
order = np.random.default_rng(0).permutation(n)[:(batches + 2) * data.BATCH_SIZE]
chunks = [order[i:i + data.BATCH_SIZE] for i in range(0, len(order), data.BATCH_SIZE)]
if framework == "torch":
    import torch
    source = devices.LoaderBatches(split, torch.device("cpu"), workers)
    stream = source.iterate([torch.as_tensor(c) for c in chunks])
elif framework == "paddle":
    source = devices.LoaderBatches(split, workers)
    stream = source.iterate(chunks)
else:
    source = devices.Batches(split)
    stream = iter(source.dataset(order, 0, len(chunks)))
for _ in range(2):
    next(stream)
start = time.perf_counter()
samples = 0
for x, y in stream:
    samples += int(np.asarray(y).shape[0])
print(json.dumps({"samples": samples, "seconds": time.perf_counter() - start}))
"""

REFERENCE = r"""
import json, sys, time
from pathlib import Path
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

root, side, batch, workers, batches, mean, std = json.loads(sys.argv[1])
MEAN = np.asarray(mean, np.float32).reshape(3, 1, 1)
STD = np.asarray(std, np.float32).reshape(3, 1, 1)

class Folder(Dataset):  # torchvision.datasets.ImageFolder + Resize + ToTensor + Normalize, by hand
    def __init__(self, root):
        classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir())
        self.samples = [(str(f), k) for k, c in enumerate(classes) for f in sorted((Path(root) / c).iterdir())]
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, i):
        path, label = self.samples[i]
        with Image.open(path) as image:
            image = image.convert("RGB").resize((side, side), Image.Resampling.BILINEAR)
        x = (np.asarray(image, np.float32).transpose(2, 0, 1) / 255.0 - MEAN) / STD
        return torch.from_numpy(x), label

loader = DataLoader(Folder(root), batch_size=batch, shuffle=True, num_workers=workers,
                    persistent_workers=workers > 0, generator=torch.Generator().manual_seed(0))
stream = iter(loader)
for _ in range(2):
    next(stream)
start = time.perf_counter()
samples = 0
for _ in range(batches):
    x, y = next(stream)
    samples += len(y)
print(json.dumps({"samples": samples, "seconds": time.perf_counter() - start}))
"""


def write_folder(root: Path, images: int, side: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    encoded = []
    for _ in range(32):  # encoding is the slow part: the files cycle through 32 distinct images
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), np.uint8)).save(buffer, "JPEG", quality=90)
        encoded.append(buffer.getvalue())
    for i in range(images):
        folder = root / f"class{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:06d}.jpg").write_bytes(encoded[i % 32])


def spec(root: Path, framework: str, args: argparse.Namespace) -> PipelineSpec:
    side = args.input
    nodes = [{"id": "in", "op": "Input", "params": {"shape": [3, side, side]}}, {"id": "pool", "op": "GlobalAvgPool"},
             {"id": "fc", "op": "Linear", "params": {"out_features": 10}}, {"id": "out", "op": "Output"}]
    edges = [{"source": a["id"], "target": b["id"]} for a, b in zip(nodes, nodes[1:])]
    return PipelineSpec.model_validate({"name": "bench", "data": {
        "source": str(root), "format": "image_folder", "num_classes": 10, "input_shape": [3, side, side],
        "batch_size": args.batch, "validation_split": 0.0, "loading": "stream", "num_workers": args.workers,
        "preprocessing": [{"op": "resize", "size": [side, side]}, {"op": "scale", "max_value": 255.0},
                          {"op": "normalize", "mean": MEAN, "std": STD}]},
        "model": {"nodes": nodes, "edges": edges}, "training": {"framework": framework}})


def measure(command: list[str], cwd: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{command[:3]} failed:\n{result.stderr[-3000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return figures["samples"] / figures["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--side", type=int, default=256, help="the JPEGs' width and height")
    parser.add_argument("--input", type=int, default=224, help="the model's input size (resized to)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3, help="turns each loader takes (the median is shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        write_folder(root, args.images, args.side)
        for path in root.rglob("*.jpg"):
            path.read_bytes()  # warm the page cache for every loader alike
        config = [str(root), args.input, args.batch, args.workers, args.batches, MEAN, STD]
        loaders = {REFERENCE_NAME: ([sys.executable, "-c", REFERENCE, json.dumps(config)], Path(tmp))}
        for framework in ("torch", "keras", "paddle"):
            folder = Path(tmp) / framework
            generate(spec(root, framework, args), framework).write(folder)
            driver = PROGRAM_DRIVER.replace("sys.argv_bench", repr([framework, args.batches, args.workers]))
            loaders[f"generated {framework} program"] = ([sys.executable, "-c", driver], folder)
        turns: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(args.repeat):
            for name, (command, cwd) in loaders.items():
                turns[name].append(measure(command, cwd))
    rates = {name: statistics.median(values) for name, values in turns.items()}
    reference = rates[REFERENCE_NAME]
    print(f"{args.images} JPEGs {args.side}x{args.side} -> {args.input}x{args.input}, batch {args.batch}, "
          f"{args.workers} workers, {args.batches} batches, median of {args.repeat}, {os.cpu_count()} CPUs")
    print(f"| {'loader':<52} | {'samples/s':>9} | {'ratio':>5} |")
    print(f"|{'-' * 54}|{'-' * 10}:|{'-' * 6}:|")
    for name, rate in rates.items():
        print(f"| {name:<52} | {rate:>9.0f} | {rate / reference:>5.2f} |")


if __name__ == "__main__":
    main()
