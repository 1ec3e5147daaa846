"""Small example data in the layout a pipeline's data layer expects, so a template runs as shipped.

``write_example_data(spec, root)`` writes under ``root / spec.data.source``: a data root that
holds it makes the pipeline runnable (submission resolves the relative source under the user's
data roots and the program reads that absolute path). The samples carry a learnable
signal (each class has its own mean colour, or its own words) under random noise, so a short run
shows the loss falling; they are not a benchmark. Sizes stay small: about ``samples`` samples in
all, at least ``per_class`` of each class.

Example data is marked as such (:data:`MARKER`: a hidden JSON file inside the folder, or beside the
file, listing the files written; written before them). Writing again replaces only the files an
earlier marker lists; anything else already at the source's path is the user's and is never
overwritten: :func:`write_example_data` refuses with a problem naming it. The command line
(``python -m flowtrain example-data``) and the portal's "Generate example data" both write here.
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from core.errors import Problem, SpecError
from core.mapping.data import resolve_format
from core.spec import DataSpec, PipelineSpec, Resize, Tokenize

SHARD_SIZE = 100  # samples per WebDataset shard
WORDS = ("good", "great", "fine", "bad", "poor", "awful", "plot", "actor", "film", "scene", "music", "story")


MARKER = ".flowtrain-example-data.json"  # in the folder it describes, or ``.NAME`` + this beside a file
MARKER_TAG = "FlowTrain example data"
WRITABLE_FORMATS = ("image_folder", "webdataset", "csv", "npy", "npz")


@dataclass(frozen=True)
class ExampleData:
    path: Path  # what the data layer's source names, under the root
    samples: int
    detail: str  # one human line: "1,000 JPEG images in 1000 class folders (224×224)"
    files: int = 0  # data files written (the marker not counted)
    size_bytes: int = 0

    @property
    def amount(self) -> str:
        """How much was written: "1,000 files, 40.2 MB"."""
        size, unit = float(self.size_bytes), "B"
        for bigger in ("kB", "MB", "GB"):
            if size < 1024:
                break
            size, unit = size / 1024, bigger
        return f"{self.files:,} file{'s' if self.files != 1 else ''}, {size:.{0 if unit == 'B' else 1}f} {unit}"


def example_target(data: DataSpec) -> tuple[PurePosixPath, str]:
    """The relative path and the format example data for ``data`` would have; SpecError when there is
    none to write (a built-in dataset, an absolute source, a format FlowTrain cannot write)."""
    if data.source.startswith("sklearn:"):
        raise SpecError([Problem("data.source", "is a built-in dataset: it needs no example data",
                                 received=data.source)])
    relative = PurePosixPath(data.source)
    if relative.is_absolute() or ".." in relative.parts or data.source.startswith("~"):
        raise SpecError([Problem("data.source", "example data is written under the root, so the source must be "
                                 "a relative path without '..'", received=data.source)])
    fmt = resolve_format(data.source, data.format)
    if fmt not in WRITABLE_FORMATS:
        raise SpecError([Problem("data.format", "FlowTrain cannot write example data of this format", received=fmt,
                                 expected=", ".join(WRITABLE_FORMATS[:-1]) + " or " + WRITABLE_FORMATS[-1])])
    return relative, fmt


def marker_of(path: Path, fmt: str) -> Path:
    """Where the marker of example data at ``path`` lies: inside a folder, beside a file (hidden)."""
    return path / MARKER if fmt in ("image_folder", "webdataset") else path.parent / f".{path.name}{MARKER}"


def write_example_data(spec: PipelineSpec, root: Path, samples: int = 300, per_class: int = 1,
                       seed: int = 0) -> ExampleData:
    """Write example data for ``spec`` under ``root``; SpecError when its data layer names none to write,
    or when something that is not FlowTrain example data is in the way (it is never overwritten)."""
    data = spec.data
    relative, fmt = example_target(data)
    classes = data.num_classes or 2
    count = max(samples, classes * per_class)
    labels = np.arange(count) % classes
    rng = np.random.default_rng(seed)
    path = root / relative
    marker = marker_of(path, fmt)
    files = _file_names(fmt, path, labels, classes)
    _make_room(path, fmt, marker, files)
    marker.parent.mkdir(parents=True, exist_ok=True)
    # the marker first: data left half-written (a crash, a full disk) is still known to be example data
    marker.write_text(json.dumps({"written_by": MARKER_TAG, "source": data.source, "format": fmt,
                                  "samples": count, "files": files}), encoding="utf-8")
    if fmt in ("image_folder", "webdataset"):
        shape = _image_shape(spec)
        if fmt == "image_folder":
            for k, name in zip(labels, files):
                (path / name).parent.mkdir(parents=True, exist_ok=True)
                (path / name).write_bytes(_jpeg(_image(rng, int(k), classes, shape)))
            where = f"in {classes} class folders"
        else:
            _write_shards(path, labels, [_jpeg(_image(rng, int(k), classes, shape)) for k in labels])
            where = f"in {len(files)} WebDataset shard(s)"
        detail = f"{count:,} JPEG images {where} ({shape[1]}×{shape[2]})"
    elif fmt == "csv":
        _write_csv(data, path, labels, rng, classes)
        detail = f"a CSV table of {count:,} rows"
    else:
        shape = tuple(data.input_shape or [4])
        x = (rng.normal(0, 1, (count, *shape)) + labels.reshape(-1, *[1] * len(shape))).astype(np.float32)
        if fmt == "npy":
            np.save(path, x)
            np.save(path.with_name("y.npy"), labels)
        else:
            np.savez(path, x=x, y=labels)
        detail = f"{count:,} samples of shape {shape} ({fmt})"
    size = sum((marker.parent / name).stat().st_size for name in files)
    return ExampleData(path, count, detail, len(files), size)


def _file_names(fmt: str, path: Path, labels: np.ndarray, classes: int) -> list[str]:
    """The data files example data consists of, relative to its marker's folder (what the marker lists)."""
    if fmt == "image_folder":
        width = len(str(classes - 1))
        return [f"class{k:0{width}d}/{i:06d}.jpg" for i, k in enumerate(labels)]
    if fmt == "webdataset":
        return [f"shard-{start // SHARD_SIZE:06d}.tar" for start in range(0, len(labels), SHARD_SIZE)]
    return [path.name, "y.npy"] if fmt == "npy" else [path.name]


def _refuse(path: Path, why: str) -> SpecError:
    return SpecError([Problem(
        "data.source", f"{path} {why}; it is left as it is (FlowTrain never overwrites data it did not write)",
        received=str(path), fix="if it is your data, choose it as the source; to write example data, move it "
        "away or name another source")])


def _make_room(path: Path, fmt: str, marker: Path, files: list[str]) -> None:
    """Refuse when data that is not FlowTrain example data is where ``files`` would go; remove the files
    of earlier example data there (those its marker lists, nothing else)."""
    if marker.is_file():
        base, names = marker.parent, _marked_files(marker, path)
        for name in names:
            (base / name).unlink(missing_ok=True)
        for folder in sorted({(base / n).parent for n in names}, reverse=True):
            if folder != base and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return
    if fmt in ("image_folder", "webdataset"):
        if path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir()))):
            raise _refuse(path, "already exists and is not FlowTrain example data")
        return
    for name in files:
        if (path.parent / name).exists() or (path.parent / name).is_symlink():
            raise _refuse(path.parent / name, "already exists and is not FlowTrain example data")


def _marked_files(marker: Path, path: Path) -> list[str]:
    """The files a marker lists; SpecError when it is not one FlowTrain wrote."""
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        doc = None
    names = doc.get("files") if isinstance(doc, dict) and doc.get("written_by") == MARKER_TAG else None
    if not isinstance(names, list) or not all(
            isinstance(n, str) and n and not PurePosixPath(n).is_absolute() and ".." not in PurePosixPath(n).parts
            for n in names):
        raise _refuse(path, f"has a marker FlowTrain cannot read ({marker})")
    return names


def _write_csv(data: DataSpec, path: Path, labels: np.ndarray, rng: np.random.Generator, classes: int) -> None:
    column = next((p.column for p in data.preprocessing if isinstance(p, Tokenize)), None)
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


def _write_shards(folder: Path, labels: np.ndarray, images: list[bytes]) -> None:
    for start in range(0, len(labels), SHARD_SIZE):
        with tarfile.open(folder / f"shard-{start // SHARD_SIZE:06d}.tar", "w") as tar:
            for i in range(start, min(start + SHARD_SIZE, len(labels))):
                for name, data in ((f"{i:06d}.jpg", images[i]), (f"{i:06d}.cls", str(int(labels[i])).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
