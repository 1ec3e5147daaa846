"""A segmentation source's masks checked against its images before any job: every mask whose size
differs from its image, every class index the model cannot predict (not the ignore index), every image
without a mask, each named by file (and sample), all at once.

Layouts (docs/segmentation.md):

- an image folder: ``SOURCE/images/STEM.png|jpg|jpeg`` and ``SOURCE/<mask_folder>/STEM.png``, one
  single-channel PNG of class indices per image;
- ``.npz``: arrays ``x`` (images ``(N, H, W)``, ``(N, C, H, W)`` or ``(N, H, W, C)``) and ``y`` (or the
  target's name) of masks ``(N, H, W)``;
- ``.npy``: the images in SOURCE, the masks in ``y.npy`` (or ``TARGET.npy``) beside it;
- WebDataset shards (a folder of ``*.tar``, or one): members ``KEY.png|jpg|jpeg`` and ``KEY.mask.png``.

Only image headers are read for sizes; masks are decoded (their values are the labels).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from core.errors import Problem
from core.mapping.data import resolve_format
from core.spec import DataSpec

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
IMAGES = "images"
MAX_NAMED = 10  # problems named one by one per kind; past them, a count
MASK_MODES = ("L", "P", "I", "I;16", "1")  # single-channel PNGs


def mask_problems(data: DataSpec, source: Path) -> list[Problem]:
    """Every problem of the masks under ``source`` (a resolved path); [] for other tasks."""
    if data.task != "segmentation" or data.num_classes is None:
        return []  # no num_classes is the validator's problem already
    fmt = resolve_format(str(source), data.format)
    if fmt == "image_folder":
        found = _folder_problems(data, source)
    elif fmt in ("npz", "npy"):
        found = _array_problems(data, source, fmt)
    elif fmt == "webdataset":
        found = _shard_problems(data, source)
    else:
        return [Problem("data.format", f"segmentation cannot read masks from {fmt}", received=fmt,
                        expected="image_folder (with a mask folder), npz, npy or webdataset",
                        fix="store the images with their masks as an image folder, .npz, .npy or WebDataset "
                        "shards (KEY.png with KEY.mask.png)")]
    return _limited(found)


def _folder_problems(data: DataSpec, source: Path) -> Iterator[Problem]:
    from PIL import UnidentifiedImageError

    images, masks = source / IMAGES, source / data.mask_folder
    for folder, what in ((images, "the images"), (masks, "the masks")):
        if not folder.is_dir():
            yield Problem("data.source", f"has no folder {folder.name}/ for {what}", received=str(source),
                          expected=f"{images.name}/ and {masks.name}/ inside it (data.mask_folder names the second)",
                          fix=f"put the images in {images} and their PNG masks, same stem, in {masks}")
            return
    mask_of = {p.stem: p for p in masks.iterdir() if p.suffix.lower() == ".png" and p.is_file()}
    for image_path in sorted(p for p in images.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES):
        mask_path = mask_of.get(image_path.stem)
        if mask_path is None:
            yield Problem("data.mask_folder", f"{image_path} has no mask", received=f"no {image_path.stem}.png "
                          f"in {masks}", expected="one PNG mask per image, with the image's stem",
                          fix=f"add {masks / (image_path.stem + '.png')}, or remove the image")
            continue
        try:
            size, mode, values = _image_size_and_mask(image_path, mask_path)
        except (OSError, UnidentifiedImageError) as exc:
            yield Problem("data.source", f"{mask_path} or its image cannot be read ({exc})", fix="save both again")
            continue
        if values is None:
            yield _not_class_indices("data.mask_folder", str(mask_path), mode)
            continue
        yield from _mask_problems(data, str(mask_path), values, (size[1], size[0]), str(image_path))


def _image_size_and_mask(image: Path | io.BytesIO,
                         mask: Path | io.BytesIO) -> tuple[tuple[int, int], str, np.ndarray | None]:
    """The image's (width, height) from its header alone, the mask's mode, and its values when that mode
    holds class indices (else None)."""
    from PIL import Image

    with Image.open(image) as opened:
        size = opened.size
    with Image.open(mask) as opened:
        return size, opened.mode, (np.asarray(opened) if opened.mode in MASK_MODES else None)


def _not_class_indices(location: str, where: str, mode: str) -> Problem:
    return Problem(location, f"{where} is not a mask of class indices", received=f"a {mode} image",
                   expected="a single-channel PNG (mode L, P or I) whose values are class indices",
                   fix="save the mask with one channel of class indices, not colours")


def _shard_problems(data: DataSpec, source: Path) -> Iterator[Problem]:
    """Each shard's KEY.png|jpg|jpeg with its KEY.mask.png, the mask decoded and the image's header read."""
    from PIL import UnidentifiedImageError

    shards = sorted(p for p in source.iterdir() if p.suffix == ".tar") if source.is_dir() else [source]
    for shard in shards:
        images: dict[str, bytes] = {}
        masks: dict[str, bytes] = {}
        try:
            with tarfile.open(shard, mode="r:") as tar:
                for member in tar:
                    key, _, ext = member.name.partition(".")
                    if member.isfile() and ext.lower() in ("mask.png", *(s[1:] for s in IMAGE_SUFFIXES)):
                        (masks if ext.lower() == "mask.png" else images)[key] = tar.extractfile(member).read()
        except (OSError, tarfile.TarError) as exc:
            yield Problem("data.source", f"{shard} cannot be read as a tar shard ({exc})", fix="write it again")
            continue
        for key in sorted(set(images) - set(masks)):
            yield Problem("data.source", f"{shard}: sample {key!r} has no mask", received=f"no {key}.mask.png",
                          expected="KEY.mask.png beside each KEY.png (or .jpg)",
                          fix=f"add {key}.mask.png to the shard, or remove the image")
        for key in sorted(set(images) & set(masks)):
            where = f"{shard}, member {key}.mask.png"
            try:
                size, mode, values = _image_size_and_mask(io.BytesIO(images[key]), io.BytesIO(masks[key]))
            except (OSError, UnidentifiedImageError) as exc:
                yield Problem("data.source", f"{where} or its image cannot be read ({exc})", fix="write it again")
                continue
            if values is None:
                yield _not_class_indices("data.source", where, mode)
                continue
            yield from _mask_problems(data, where, values, (size[1], size[0]), f"{shard}, sample {key}")


def _array_problems(data: DataSpec, source: Path, fmt: str) -> Iterator[Problem]:
    try:
        if fmt == "npz":
            with np.load(source, allow_pickle=False) as arrays:
                keys = list(arrays.keys())
                y_key = data.target if data.target in keys else "y"
                x_key = "x" if "x" in keys else next((k for k in keys if k != y_key), None)
                if y_key not in keys or x_key is None:
                    yield Problem("data.source", f"{source} has no images and masks", received=f"arrays {keys}",
                                  expected="arrays 'x' (images) and 'y' (masks)",
                                  fix="save with numpy.savez(path, x=images, y=masks)")
                    return
                x_shape, masks, where = arrays[x_key].shape, arrays[y_key], f"{source}: {y_key}"
        else:
            label_path = next((p for p in (source.with_name(f"{data.target}.npy"), source.with_name("y.npy"))
                               if p.exists() and p != source), None)
            if label_path is None:
                yield Problem("data.source", f"{source} has no masks beside it", received="no y.npy",
                              expected=f"the masks (N, H, W) in {source.with_name('y.npy')}",
                              fix="save the masks with numpy.save beside the images")
                return
            x_shape = np.load(source, mmap_mode="r", allow_pickle=False).shape
            masks, where = np.load(label_path, mmap_mode="r", allow_pickle=False), str(label_path)
    except (OSError, ValueError, EOFError) as exc:
        yield Problem("data.source", f"{source} cannot be read ({exc})", fix="save it again with numpy")
        return
    if masks.ndim != 3 or len(masks) != x_shape[0]:
        yield Problem("data.source", f"{where} is not one mask per image", received=f"shape {masks.shape}",
                      expected=f"({x_shape[0]}, H, W): one mask of class indices per image",
                      fix="save one (H, W) mask of class indices per image")
        return
    size = _image_size(x_shape)
    for i in range(len(masks)):
        yield from _mask_problems(data, f"{where}[{i}]", np.asarray(masks[i]), size, f"image {i}")


def _image_size(x_shape: tuple[int, ...]) -> tuple[int, int]:
    """(H, W) of images stored (N, H, W), (N, C, H, W) or (N, H, W, C) (channels: at most 4)."""
    if len(x_shape) == 4 and x_shape[3] <= 4 < x_shape[1]:
        return x_shape[1], x_shape[2]
    return x_shape[-2], x_shape[-1]


def _mask_problems(data: DataSpec, where: str, values: np.ndarray, size: tuple[int, int],
                   image: str) -> Iterator[Problem]:
    classes, ignore = data.num_classes or 0, data.ignore_index
    if values.shape[:2] != size:
        yield Problem("data.source", f"{where}: the mask's size differs from its image's ({image})",
                      received=f"{values.shape[0]}×{values.shape[1]} (height × width)",
                      expected=f"{size[0]}×{size[1]}, the image's", fix="save the mask at its image's size")
        return
    if values.dtype.kind == "f" and not np.array_equal(values, np.floor(values)):
        yield Problem("data.source", f"{where}: the mask holds fractions", received=str(values.dtype),
                      expected="integer class indices", fix="save the mask as integers")
        return
    bad = np.unique(values[(values < 0) | ((values >= classes) & (values != (-1 if ignore is None else ignore)))])
    if bad.size:
        shown = ", ".join(str(int(v)) for v in bad[:5]) + (" …" if bad.size > 5 else "")
        yield Problem("data.num_classes", f"{where}: mask values that are no class", received=shown,
                      expected=f"class indices 0–{classes - 1}"
                      + (f" or the ignore index {ignore}" if ignore is not None else ""),
                      fix="raise data.num_classes, set data.ignore_index to the value of unlabelled pixels, "
                      "or correct the mask")


def _limited(problems: Iterator[Problem]) -> list[Problem]:
    """The first MAX_NAMED problems of each location, then one counting the rest (every file is still read)."""
    shown: list[Problem] = []
    more: dict[str, int] = {}
    count: dict[str, int] = {}
    for p in problems:
        count[p.location] = count.get(p.location, 0) + 1
        if count[p.location] <= MAX_NAMED:
            shown.append(p)
        else:
            more[p.location] = more.get(p.location, 0) + 1
    shown += [Problem(loc, f"and {n:,} more masks like these") for loc, n in more.items()]
    return shown
