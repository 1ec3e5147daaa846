"""A segmentation run's predictions: one PNG mask of class indices per input image, and how many
pixels each class got.

The model's scores ``(K, h, w)`` for an input come one batch at a time (:func:`core.prediction.onnx_batches`,
or a framework's outputs); where the input image was another size than the model's Input (the worker
resized it to the Input's), the scores are resized back to the image's size (bilinear, per class)
before the argmax, so every mask lies over its own image. Masks are written as 8-bit PNGs (16-bit for
more than 256 classes) under the output folder, named by :attr:`core.prediction.Inputs.masks`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import CommandError
from core.prediction import Inputs

MASKS_JSONL = "masks.jsonl"  # per image: its mask file, size and pixels per class, beside the masks


@dataclass
class MaskPrediction:
    """One image's mask: where it was written (None: not written), its size and pixels per class."""

    name: str
    mask: Path | None
    size: tuple[int, int]  # (height, width)
    pixels: list[int]  # per class index
    resized: bool  # the input was resized to the model's Input and the scores back


def class_labels(inputs: Inputs, classes: int) -> list[str]:
    """The class names the data gave, else ``class_0`` … (a mask holds indices)."""
    names = inputs.class_names or []
    return [str(names[k]) if k < len(names) else f"class_{k}" for k in range(classes)]


def mask_paths(inputs: Inputs, out: Path) -> list[Path]:
    """Each input's mask file under ``out``; refused (nothing written) when two inputs would write the
    same file or a mask would replace one of the inputs."""
    assert inputs.masks is not None, "prepare_inputs gives mask names for a segmentation run"
    paths = [out / m for m in inputs.masks]
    seen: dict[Path, str] = {}
    for path, name in zip(paths, inputs.names, strict=True):
        if path in seen:
            raise CommandError(f"--out {out}: {seen[path]} and {name} would both write the mask {path}; predict "
                               "them in separate calls, each with its own --out folder")
        seen[path] = name
    given = {os.path.realpath(n) for n in inputs.names}
    clash = next((p for p in paths if os.path.realpath(p) in given), None)
    if clash is not None:
        raise CommandError(f"--out {out}: the mask {clash} would replace the input image of that name; choose "
                           "another --out folder")
    return paths


def segment(batches: Iterable[np.ndarray], inputs: Inputs, out: Path | None) -> list[MaskPrediction]:
    """The masks of ``inputs`` from the model's scores (``batches`` of ``(B, K, h, w)``, in input
    order); with ``out``, each written as a PNG (see :func:`mask_paths`)."""
    assert inputs.sizes is not None, "prepare_inputs gives sizes for a segmentation run"
    paths = mask_paths(inputs, out) if out is not None else [None] * len(inputs.names)
    results: list[MaskPrediction] = []
    for scores in batches:
        scores = np.asarray(scores)
        if scores.ndim != 4:
            raise CommandError(f"the model gave outputs of shape {scores.shape[1:]}, not one score per class and "
                               "pixel (K, H, W); is this a segmentation run's model?", exit_code=1)
        for sample in scores:
            i = len(results)
            size = inputs.sizes[i]
            resized = tuple(sample.shape[1:]) != tuple(size)
            mask = np.argmax(_resized(sample, size) if resized else sample, axis=0)
            if paths[i] is not None:
                _write_mask(mask, paths[i], len(sample))
            pixels = np.bincount(mask.reshape(-1), minlength=len(sample))
            results.append(MaskPrediction(inputs.names[i], paths[i], (int(size[0]), int(size[1])),
                                          [int(n) for n in pixels], resized))
    return results


def _resized(scores: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Each class's scores ``(K, h, w)`` resized to ``size`` (height, width), bilinear."""
    from PIL import Image

    height, width = size
    return np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(s, np.float32)).resize(
        (width, height), Image.Resampling.BILINEAR)) for s in scores])


def _write_mask(mask: np.ndarray, path: Path, classes: int) -> None:
    """``mask`` as a single-channel PNG: 8-bit (mode L) for up to 256 classes, else 16-bit."""
    from PIL import Image

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(mask.astype(np.uint8 if classes <= 256 else np.uint16)).save(path, format="PNG")
    except OSError as exc:
        raise CommandError(f"{path}: cannot write the mask ({exc.strerror or exc})", exit_code=1) from exc


# --------------------------------------------------------------------------- output


def as_mask_records(results: list[MaskPrediction], labels: list[str]) -> list[dict[str, object]]:
    """One JSON-ready dict per image: input, mask file, height, width, pixels per class name."""
    return [{"input": r.name, "mask": str(r.mask) if r.mask is not None else None, "height": r.size[0],
             "width": r.size[1], "pixels": dict(zip(labels, r.pixels, strict=True))} for r in results]


def as_mask_rows(results: list[MaskPrediction], labels: list[str]) -> tuple[list[str], list[list[str]]]:
    """A header and one row per image: its size and the pixels of each class."""
    header = ["input", "height", "width", *labels]
    return header, [[r.name, str(r.size[0]), str(r.size[1]), *map(str, r.pixels)] for r in results]


def write_mask_records(results: list[MaskPrediction], labels: list[str], out: Path) -> Path:
    """``out/masks.jsonl``: :func:`as_mask_records`, one line per image."""
    path = out / MASKS_JSONL
    try:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in as_mask_records(results, labels)), encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: cannot write the file ({exc.strerror or exc})", exit_code=1) from exc
    return path
