"""Example data for segmentation: coloured shapes on a noisy background, each image with its mask of
class indices (0 the background, 1 discs, 2 squares, 3 triangles, further classes more of those shapes
in other colours). Each class has a colour of its own (jittered) as well as a shape, so a short run
learns to segment them. Written by :func:`core.example_data.write_example_data` in the layouts of
docs/segmentation.md: an image folder with a parallel mask folder (PNG, same stem), ``.npz``, ``.npy``, or
WebDataset shards whose samples are ``KEY.png`` with ``KEY.mask.png``.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from core.errors import Problem, SpecError
from core.spec import PipelineSpec

FORMATS = ("image_folder", "npz", "npy", "webdataset")
IMAGES = "images"  # as core.segmentation_data reads them
SHARD_SIZE = 100  # samples per WebDataset shard, as core.example_data writes them


def file_names(fmt: str, path: Path, count: int, mask_folder: str) -> list[str]:
    """The files of ``count`` samples, relative to the folder that holds them."""
    if fmt not in FORMATS:
        raise SpecError([Problem("data.format", "FlowTrain writes segmentation example data as an image folder, "
                                 ".npz, .npy or WebDataset shards", received=fmt, expected=", ".join(FORMATS))])
    if fmt == "image_folder":
        return [f"{IMAGES}/{i:06d}.png" for i in range(count)] + [f"{mask_folder}/{i:06d}.png" for i in range(count)]
    if fmt == "webdataset":
        return [f"shard-{start // SHARD_SIZE:06d}.tar" for start in range(0, count, SHARD_SIZE)]
    return [path.name, "y.npy"] if fmt == "npy" else [path.name]


def blobs(spec: PipelineSpec, fmt: str, path: Path, count: int, rng: np.random.Generator,
          shape: tuple[int, int, int]) -> Iterator[tuple[str, bytes]]:
    """(file name, contents) of every file, in the order :func:`file_names` lists them."""
    classes = spec.data.num_classes or 2
    pairs = [sample(rng, classes, shape) for _ in range(count)]
    names = file_names(fmt, path, count, spec.data.mask_folder)
    if fmt == "image_folder":
        for name, (image, _) in zip(names, pairs):
            yield name, encoded(image, "PNG")
        for name, (_, mask) in zip(names[count:], pairs):
            yield name, encoded(mask, "PNG")
        return
    if fmt == "webdataset":
        for name, start in zip(names, range(0, count, SHARD_SIZE)):
            yield name, _shard(pairs, start)
        return
    x = np.stack([image.transpose(2, 0, 1) for image, _ in pairs]).astype(np.float32)
    y = np.stack([mask for _, mask in pairs]).astype(np.int64)
    buffer = io.BytesIO()
    if fmt == "npz":
        np.savez(buffer, x=x, y=y)
        yield names[0], buffer.getvalue()
        return
    np.save(buffer, x)
    yield names[0], buffer.getvalue()
    buffer = io.BytesIO()
    np.save(buffer, y)
    yield names[1], buffer.getvalue()


def sample(rng: np.random.Generator, classes: int, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """One image (H, W, C) uint8 and its mask (H, W) uint8: one to three shapes, later ones on top."""
    channels, height, width = shape
    image = np.clip(rng.normal(90, 25, (height, width, 3)), 0, 255)
    mask = np.zeros((height, width), np.uint8)
    rows, cols = np.mgrid[0:height, 0:width]
    for _ in range(int(rng.integers(1, 4))):
        k = int(rng.integers(1, classes)) if classes > 1 else 0
        size = rng.uniform(0.12, 0.25) * min(height, width)
        cy, cx = rng.uniform(size, height - size), rng.uniform(size, width - size)
        kind = (k - 1) % 3
        if kind == 0:
            inside = (rows - cy) ** 2 + (cols - cx) ** 2 <= size ** 2
        elif kind == 1:
            inside = (np.abs(rows - cy) <= size) & (np.abs(cols - cx) <= size)
        else:  # a triangle pointing up: below its apex, within the widening sides
            inside = (rows >= cy - size) & (rows <= cy + size) & (np.abs(cols - cx) <= (rows - (cy - size)) / 2)
        angle = 2 * np.pi * k / max(classes, 2)
        colour = 150 + 90 * np.cos(angle + np.arange(3) * 2 * np.pi / 3) + rng.normal(0, 10, 3)
        image[inside] = np.clip(colour + rng.normal(0, 10, (int(inside.sum()), 3)), 0, 255)
        mask[inside] = k
    pixels = image.astype(np.uint8)
    return (pixels.mean(axis=2, keepdims=True).astype(np.uint8) if channels == 1 else pixels), mask


def _shard(pairs: list[tuple[np.ndarray, np.ndarray]], start: int) -> bytes:
    """One tar of the samples from ``start``: KEY.png (the image) and KEY.mask.png (its mask)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(start, min(start + SHARD_SIZE, len(pairs))):
            image, mask = pairs[i]
            for name, data in ((f"{i:06d}.png", encoded(image, "PNG")), (f"{i:06d}.mask.png", encoded(mask, "PNG"))):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def detail(fmt: str, count: int, classes: int, shape: tuple[int, int, int]) -> str:
    where = {"image_folder": "PNG images with PNG masks",
             "webdataset": "PNG images with PNG masks in WebDataset shards"}.get(fmt, f"images with masks ({fmt})")
    return f"{count:,} {where} of coloured shapes, {classes} classes ({shape[1]}×{shape[2]})"


def encoded(pixels: np.ndarray, fmt: str, **options: object) -> bytes:
    """An image file's bytes (PIL's ``fmt``: PNG, JPEG…); a single-channel (H, W, 1) image as greyscale."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels[:, :, 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels).save(buffer, fmt,
                                                                                                   **options)
    return buffer.getvalue()
