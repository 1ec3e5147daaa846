"""Small example data in the layout a pipeline's data layer expects, so a template runs as shipped.

``write_example_data(spec, root)`` writes under ``root / spec.data.source``: a data root that
holds it makes the pipeline runnable (submission resolves the relative source under the user's
data roots and the program reads that absolute path). The samples carry a learnable
signal (each class has its own mean colour, or its own words) under random noise, so a short run
shows the loss falling; they are not a benchmark. Sizes stay small: about ``samples`` samples in
all, at least ``per_class`` of each class.
"""

from __future__ import annotations

import csv
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from core.errors import Problem, SpecError
from core.mapping.data import resolve_format
from core.spec import PipelineSpec, Resize, Tokenize

WORDS = ("good", "great", "fine", "bad", "poor", "awful", "plot", "actor", "film", "scene", "music", "story")


@dataclass(frozen=True)
class ExampleData:
    path: Path  # what the data layer's source names, under the root
    samples: int
    detail: str  # one human line: "1,000 JPEG images in 1000 class folders (224×224)"


def write_example_data(spec: PipelineSpec, root: Path, samples: int = 300, per_class: int = 1,
                       seed: int = 0) -> ExampleData:
    """Write example data for ``spec`` under ``root``; SpecError when its data layer names none to write."""
    data = spec.data
    if data.source.startswith("sklearn:"):
        raise SpecError([Problem("data.source", "is a built-in dataset: it needs no example data",
                                 received=data.source)])
    relative = PurePosixPath(data.source)
    if relative.is_absolute() or ".." in relative.parts:
        raise SpecError([Problem("data.source", "example data is written under the root, so the source must be "
                                 "a relative path without '..'", received=data.source)])
    fmt = resolve_format(data.source, data.format)
    classes = data.num_classes or 2
    count = max(samples, classes * per_class)
    labels = np.arange(count) % classes
    rng = np.random.default_rng(seed)
    path = root / relative
    if fmt in ("image_folder", "webdataset"):
        shape = _image_shape(spec)
        images = [_jpeg(_image(rng, int(k), classes, shape)) for k in labels]
        if fmt == "image_folder":
            width = len(str(classes - 1))
            for i, (k, image) in enumerate(zip(labels, images)):
                folder = path / f"class{k:0{width}d}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{i:06d}.jpg").write_bytes(image)
            where = f"in {classes} class folders"
        else:
            _write_shards(path, labels, images)
            where = f"in {-(-count // 100)} WebDataset shard(s)"
        return ExampleData(path, count, f"{count:,} JPEG images {where} ({shape[1]}×{shape[2]})")
    if fmt == "csv":
        column = next((p.column for p in data.preprocessing if isinstance(p, Tokenize)), None)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            if column is not None:
                writer.writerow([column, data.target])
                for k in labels:
                    writer.writerow([_sentence(rng, int(k), classes), f"class{k}"])
            else:
                features = (data.input_shape or [4])[0]
                writer.writerow([*(f"x{j}" for j in range(features)), data.target])
                for k in labels:
                    writer.writerow([*np.round(rng.normal(k, 1.0, features), 4), int(k)])
        return ExampleData(path, count, f"a CSV table of {count:,} rows")
    if fmt in ("npy", "npz"):
        shape = tuple(data.input_shape or [4])
        x = (rng.normal(0, 1, (count, *shape)) + labels.reshape(-1, *[1] * len(shape))).astype(np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "npy":
            np.save(path, x)
            np.save(path.with_name("y.npy"), labels)
        else:
            np.savez(path, x=x, y=labels)
        return ExampleData(path, count, f"{count:,} samples of shape {shape} ({fmt})")
    raise SpecError([Problem("data.format", "FlowTrain cannot write example data of this format", received=fmt,
                             expected="image_folder, webdataset, csv, npy or npz")])


def _image_shape(spec: PipelineSpec) -> tuple[int, int, int]:
    """(channels, height, width) of the images to write: the Input's, at the resize step's size if any."""
    shape = spec.data.input_shape or [3, 32, 32]
    resize = [p for p in spec.data.preprocessing if isinstance(p, Resize)]
    height, width = resize[-1].size if resize else shape[1:]
    return int(shape[0]), int(height), int(width)


def _image(rng: np.random.Generator, k: int, classes: int, shape: tuple[int, int, int]) -> np.ndarray:
    """Noise around a colour of its own for each class (hue spread over the classes)."""
    channels, height, width = shape
    angle = 2 * np.pi * k / classes
    colour = 128 + 80 * np.cos(angle + np.arange(3) * 2 * np.pi / 3)
    pixels = colour + rng.normal(0, 40, (height, width, 3))
    pixels = np.clip(pixels, 0, 255).astype(np.uint8)
    return pixels.mean(axis=2, keepdims=True).astype(np.uint8) if channels == 1 else pixels


def _jpeg(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _sentence(rng: np.random.Generator, k: int, classes: int) -> str:
    """Words drawn mostly from the class's own share of WORDS."""
    own = [w for i, w in enumerate(WORDS) if i % classes == k] or list(WORDS)
    return " ".join(rng.choice(own if rng.random() < 0.8 else WORDS) for _ in range(rng.integers(4, 12)))


def _write_shards(folder: Path, labels: np.ndarray, images: list[bytes], per_shard: int = 100) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for start in range(0, len(labels), per_shard):
        with tarfile.open(folder / f"shard-{start // per_shard:06d}.tar", "w") as tar:
            for i in range(start, min(start + per_shard, len(labels))):
                for name, data in ((f"{i:06d}.jpg", images[i]), (f"{i:06d}.cls", str(int(labels[i])).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
