"""Whether the data layer names data this user has: the editor's "Valid" means runnable.

A pipeline can be a valid graph and still not run. The zoo's ImageNet, CIFAR and text templates
name data (``imagenet/train``, ``cifar10/train``, ``text/reviews.csv``) that a fresh portal does not
have; the run would start, fail, and print advice meant for the command line. :func:`data_problem`
says so beforehand, as a :class:`~core.errors.Problem` on the data layer, with what to point it at
(:func:`wanted`, read from the pipeline's own data layer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core import datasets
from core.errors import Problem
from portal.dataprobe import ProbeError, resolve_source

SOURCE = "data.source"


def _shape(shape: Sequence[int]) -> str:
    return "×".join(str(d) for d in shape)


def wanted(data: Mapping[str, Any]) -> str:
    """What the data layer expects, in words: the kind of file or folder, its columns or classes."""
    fmt = data.get("format") or "auto"
    target = data.get("target") or "label"
    classes = data.get("num_classes")
    steps = [s for s in data.get("preprocessing") or [] if isinstance(s, Mapping)]
    resize = next((s.get("size") for s in steps if s.get("op") == "resize"), None)
    text = next((s.get("column") for s in steps if s.get("op") == "tokenize"), None)
    shape = data.get("input_shape")
    if data.get("task") == "language_modeling":
        return (f"a token stream: a .npy array of token ids, nanoGPT's uint16 .bin, or a text file read byte by byte "
                f"(ids below {data.get('vocab_size')}, read in blocks of {data.get('block_size')} tokens)")
    segmenting = data.get("task") == "segmentation"
    if fmt == "image_folder":
        out = (f"a folder with images/ (PNG or JPEG) and {data.get('mask_folder') or 'masks'}/ (a PNG mask of class "
               "indices per image, same stem)" if segmenting
               else "a folder with one sub-folder of images (PNG or JPEG) per class")
        if classes:
            out += f" ({classes} classes)"
        if resize:
            out += f", resized to {_shape(resize)}"
        elif shape and len(shape) == 3:
            out += f" of {_shape(shape[1:])} pixels"
        return out
    if fmt in ("csv", "parquet"):
        out = f"a {'CSV' if fmt == 'csv' else 'Parquet'} table with the label column '{target}'"
        if text:
            out += f" and the text column '{text}'"
        if classes:
            out += f" ({classes} classes)"
        return out
    labels = "masks (N, H, W) of class indices" if segmenting else "labels"
    if fmt == "npz":
        return f"an .npz file with the samples and the '{target}' array" + (f" of {labels}" if segmenting else "")
    if fmt == "npy":
        return f"an .npy array of the samples with y.npy (or {target}.npy) of its {labels} beside it"
    if fmt == "webdataset":
        return "a folder of WebDataset tar shards (shard-000000.tar, … holding KEY.jpg and KEY.cls)"
    return f"a CSV, Parquet or .npz file with the label '{target}', or a folder with one sub-folder of images per class"


def data_problem(data: Mapping[str, Any], roots: Sequence[Path], builtin_datasets: bool = True) -> Problem | None:
    """Why the data layer cannot run for this user (the source is missing or outside ``roots``), or None."""
    source = str(data.get("source") or "")
    if source.startswith("sklearn:"):
        if datasets.builtin(source) is None:
            return Problem(SOURCE, "is not a built-in dataset", received=source,
                           expected=", ".join(datasets.BUILTIN))
        if not builtin_datasets:
            return Problem(SOURCE, "needs your data: built-in datasets are switched off on this portal",
                           received=source, expected=wanted(data),
                           fix="choose a file or folder under your data roots")
        return None
    try:
        resolve_source(source, roots)
    except ProbeError as err:
        where = ", ".join(str(r) for r in roots) or "none configured"
        # say which it is: nothing there yet (inside a root or not), or a place outside the roots
        why = (f"there is nothing at {source!r} yet (your data roots: {where})" if " not found " in str(err)
               else f"{source!r} is not under your data roots ({where})" if "outside the data roots" in str(err)
               else str(err))
        return Problem(SOURCE, f"needs your data: {why}",
                       received=str(err), expected=wanted(data),
                       fix="put the data under a data root and choose it under 'File under my data roots'"
                           + (", or choose a built-in dataset" if builtin_datasets else ""))
    return None
