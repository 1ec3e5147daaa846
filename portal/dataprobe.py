"""Detect a data source's format and size at extraction time (what the portal shows).

``probe("tables/houses.csv", [root])`` → ``ProbeResult(format="csv", size=1234, ...)`` whose
``detail`` reads "format csv, 1,234 rows, 12 columns". A probe reads headers and a few samples,
never a whole dataset, so it is as quick for a terabyte as for a kilobyte: a CSV's header and first
PROBE_ROWS rows, a Parquet file's footer and first row group, .npy/.npz headers and the first
LABEL_SAMPLE labels, an image folder's file names and PROBE_IMAGES decoded images, the tar headers
of the first WebDataset shards. Past them, the size is an estimate ("about") and the class count a
lower bound ("at least"), and the result says so (``size_exact``, ``classes_exact``, ``detail``).

Paths are confined to the configured data roots: a relative source is looked up under each
root in turn, an absolute one must lie inside a root, ``..`` components are refused, and a
symbolic link that resolves outside every root is refused; in a folder source, a member that is such
a link (``cat/x.jpg -> /other/user/img.jpg``) is left out of the counts with a warning (submission
refuses it). Errors are
:class:`ProbeError` (a :class:`~core.errors.FlowTrainError`) naming the path and the fix.
"""

from __future__ import annotations

import csv
import io
import math
import os
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from core import datasets
from core.data_members import describe, inside, links_leaving
from core.errors import FlowTrainError

SUFFIX_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npz": "npz", ".npy": "npy",
                  ".tar": "webdataset"}
# What a probe reads at most: it shows a dataset in the portal, so it must take about as long for a
# terabyte as for a kilobyte. Beyond these, sizes are estimated and class counts are lower bounds.
PROBE_ROWS = 10_000  # CSV rows read (after the header)
LABEL_SAMPLE = 100_000  # labels read to count the classes of a .npy or .npz array
PROBE_MEMBERS = 2_000  # tar headers read, over at most PROBE_SHARDS shards
PROBE_SHARDS = 8
PROBE_IMAGES = 3  # images of a folder decoded
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
MAX_CLASSES = 10_000  # more distinct target values than this: not class labels
CHANNELS_BY_MODE = {"1": 1, "L": 1, "I": 1, "F": 1, "I;16": 1, "LA": 2, "P": 3, "RGB": 3, "YCbCr": 3,
                    "LAB": 3, "HSV": 3, "RGBA": 4, "CMYK": 4}


class ProbeError(FlowTrainError):
    """The source cannot be found, is outside the data roots, or cannot be read."""

    exit_code = 2


@dataclass(frozen=True)
class ProbeResult:
    format: str  # builtin | csv | parquet | npz | npy | image_folder | webdataset
    size: int  # samples (rows, array length, images)
    sample_shape: tuple[int, ...] | None  # one raw sample: (features,) or (C, H, W); None if unknown
    num_classes: int | None  # distinct target values when they look like class labels
    columns: list[str] = field(default_factory=list)  # table columns, npz array names, or class folders
    detail: str = ""  # one human line: "format csv, 1,234 rows, 12 columns"
    warnings: list[str] = field(default_factory=list)  # problems the training run would stop on
    size_exact: bool = True  # False: size is estimated from the part read (the detail says "about")
    classes_exact: bool = True  # False: num_classes counts the labels read only (the detail says "at least")

    def to_spec_fields(self) -> dict[str, Any]:
        """The ``data`` fields the extractor records in the spec."""
        return {"format": self.format, "size": self.size,
                "sample_shape": list(self.sample_shape) if self.sample_shape else None}


def probe(source: str, data_roots: Sequence[Path | str], target: str = "label") -> ProbeResult:
    """Format, size, sample shape and classes of ``source`` (``sklearn:NAME`` or a path under a root)."""
    info = datasets.builtin(source)
    if info is not None:
        return ProbeResult("builtin", info.size, info.sample_shape, info.num_classes, [],
                           f"format builtin ({info.kind}), {info.size:,} samples, sample shape "
                           f"{_shape(info.sample_shape)}, {info.num_classes} classes")
    if source.startswith("sklearn:"):
        raise ProbeError(f"unknown built-in dataset {source!r}; choose one of {', '.join(datasets.BUILTIN)}")
    path = resolve_source(source, data_roots)
    if path.is_dir():
        leaving = links_leaving(path, inside([Path(r).expanduser().resolve() for r in data_roots]))
        skip = {member for member, _real in leaving}
        found = (_probe_shards(path, skip) if any(p.suffix == ".tar" and p.name not in skip for p in path.iterdir())
                 else _probe_image_folder(path, skip))
        if not leaving:
            return found
        return replace(found, warnings=[
            f"{len(leaving):,} member(s) of the folder are symbolic links that lead outside the data roots and are "
            f"left out: {describe(leaving)}; a run is refused until they are gone: remove the links, or copy the "
            "files they point at into the folder", *found.warnings])
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ProbeError(f"{source!r}: cannot tell the format from the name; expected a .csv, .parquet or .npz "
                         "file, or a folder with one sub-folder of images per class")
    try:
        if fmt == "csv":
            return _probe_csv(path, target)
        if fmt == "parquet":
            return _probe_parquet(path, target)
        if fmt == "npy":
            return _probe_npy(path, target)
        if fmt == "webdataset":
            return _probe_shards(path)
        return _probe_npz(path, target)
    except (OSError, ValueError, zipfile.BadZipFile, csv.Error, tarfile.TarError) as exc:
        raise ProbeError(f"{source!r}: cannot read it as {fmt} ({exc})") from exc


NAME_MAX, PATH_MAX = 255, 4096  # bytes: Linux's limits (a longer one is ENAMETOOLONG from every call)


def check_path(source: str) -> None:
    """ProbeError for a path no file system holds: a name over :data:`NAME_MAX` or a path over
    :data:`PATH_MAX` bytes (checked before any file-system call, which would raise ENAMETOOLONG)."""
    size = len(source.encode("utf-8", "surrogateescape"))
    if size > PATH_MAX:
        raise ProbeError(f"data source {source[:60]!r}… is {size:,} bytes long; a path has at most {PATH_MAX:,} "
                         "bytes: choose a file or folder under your data roots")
    for part in PurePath(source).parts:
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            raise ProbeError(f"data source: the name {part[:40]!r}… is {len(part.encode('utf-8', 'surrogateescape')):,} "
                             f"bytes long; a file or folder name has at most {NAME_MAX} bytes: check the path")


def resolve_source(source: str, data_roots: Sequence[Path | str]) -> Path:
    """The existing path of ``source`` inside one of ``data_roots``; ProbeError otherwise."""
    check_path(source)
    if not data_roots:
        raise ProbeError("no data roots are configured; add [data] roots (the folders that hold training "
                         "data) to the settings file named by FLOWTRAIN_CONFIG")
    if "\x00" in source:
        raise ProbeError(f"data source {source!r} contains a NUL character")
    raw = PurePath(source)
    if ".." in raw.parts:
        raise ProbeError(f"data source {source!r} contains '..'; give a path inside a data root without '..'")
    roots = [Path(r).expanduser().resolve() for r in data_roots]
    candidates = [Path(raw)] if raw.is_absolute() else [root / raw for root in roots]
    for candidate in candidates:
        if not candidate.exists() and not candidate.is_symlink():
            continue
        real = candidate.resolve()
        inside = [root for root in roots if real == root or real.is_relative_to(root)]
        if not inside:
            why = "is a link that leads" if real != candidate.absolute() else "lies"
            raise ProbeError(f"data source {source!r} {why} outside the data roots ({real}); "
                             f"allowed roots: {', '.join(str(r) for r in roots)}")
        if not real.exists():
            raise ProbeError(f"data source {source!r} is a broken link ({candidate})")
        return real
    where = ", ".join(str(c) for c in candidates)
    raise ProbeError(f"data source {source!r} not found (looked for {where}); check the path, which is relative "
                     "to a data root")


# --------------------------------------------------------------------------- formats


def _probe_csv(path: Path, target: str) -> ProbeResult:
    """The header and the first PROBE_ROWS rows: columns, numeric features (a column counts as numeric
    when most of its values are numbers, the generated loader's rule; its other values become warnings
    naming the first row) and classes. The rows of a longer file are estimated from its size."""
    consumed = [0]
    with open(path, "rb") as raw:
        total = os.fstat(raw.fileno()).st_size
        reader = csv.reader(_text_lines(raw, consumed))
        header = next(reader, None)
        if header is None:
            raise ProbeError(f"{path}: the file is empty; the first line must name the columns")
        header_bytes = consumed[0]
        t = header.index(target) if target in header else None
        bad = [0] * len(header)
        first_bad: list[tuple[int, str] | None] = [None] * len(header)
        labels: set[str] = set()
        ragged: list[int] = []
        rows = 0
        for row in reader:
            if not row:
                continue
            rows += 1
            if len(row) != len(header) and len(ragged) < 3:
                ragged.append(rows)
            for j, value in enumerate(row[:len(header)]):
                if not _is_number(value):
                    bad[j] += 1
                    if first_bad[j] is None:
                        first_bad[j] = (rows, value)
            if t is not None and t < len(row) and len(labels) <= MAX_CLASSES:
                labels.add(row[t])
            if rows == PROBE_ROWS:
                break
    complete = consumed[0] >= total or not rows  # the rows read are all there are
    size = rows if complete else round(rows * (total - header_bytes) / max(1, consumed[0] - header_bytes))
    numeric = [2 * bad[j] < rows for j in range(len(header))]
    within = "" if complete else f" in the first {rows:,} rows"
    warnings = [f"row {r}: {len(header)} fields expected" for r in ragged]
    for j, name in enumerate(header):
        where = first_bad[j]
        if numeric[j] and where is not None:
            warnings.append(f"column {name!r}: {bad[j]} value(s){within} are not numbers, the first in row "
                            f"{where[0]} ({where[1]!r})")
    features = sum(1 for j, ok in enumerate(numeric) if ok and j != t)
    classes = _classes(labels) if t is not None else None
    rows_text = f"{size:,} rows" if complete else f"about {size:,} rows (estimated from the first {rows:,})"
    # no numeric feature (a text table): its samples get their shape from the preprocessing (tokenize),
    # and a sample shape of (0,) recorded in the data layer made the pipeline invalid (data.sample_shape[0])
    return ProbeResult("csv", size, (features,) if features else None, classes, header,
                       _detail("csv", rows_text, len(header), features, _classes_text(classes, complete, within),
                               target if t is not None else None),
                       warnings, size_exact=complete, classes_exact=complete)


def _text_lines(raw: Any, consumed: list[int]) -> Iterator[str]:
    """The lines of a binary file as text (UTF-8, a byte order mark dropped), adding up the bytes
    read into ``consumed[0]``: what the file's size is compared with."""
    for number, line in enumerate(raw):
        consumed[0] += len(line)
        yield line.decode("utf-8-sig" if number == 0 else "utf-8")


def _probe_parquet(path: Path, target: str) -> ProbeResult:
    """Rows and columns from the footer; classes from the target column of the first row group only."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ProbeError("reading Parquet needs pyarrow; pip install pyarrow") from exc
    try:
        meta = pq.ParquetFile(path)
        schema = meta.schema_arrow
        rows = meta.metadata.num_rows
        names = [str(n) for n in schema.names]
        numeric = [n for n in names if n != target and _numeric_arrow(pa, schema.field(n).type)]
        classes = None
        complete = meta.num_row_groups <= 1
        read = 0
        if target in names and meta.num_row_groups:
            column = meta.read_row_group(0, columns=[target]).column(0)
            read = len(column)
            values = column.unique().to_pylist()
            classes = _classes({str(v) for v in values[:MAX_CLASSES + 1]}) if len(values) <= MAX_CLASSES else None
            if _numeric_arrow(pa, column.type) and not all(float(v).is_integer() for v in values if v is not None):
                classes = None
    except pa.ArrowException as exc:
        raise ProbeError(f"{path}: cannot read it as Parquet ({exc})") from exc
    within = "" if complete else f" in the first row group ({read:,} rows)"
    return ProbeResult("parquet", rows, (len(numeric),) if numeric else None, classes, names,
                       _detail("parquet", f"{rows:,} rows", len(names), len(numeric),
                               _classes_text(classes, complete, within), target if target in names else None),
                       classes_exact=complete)


def _npy_header(f: Any) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the header of a .npy file (or archive member) open at its start."""
    version = np.lib.format.read_magic(f)
    shape, _, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)(f)
    return tuple(int(d) for d in shape), dtype


def _probe_npz(path: Path, target: str) -> ProbeResult:
    """Shapes from the arrays' headers; classes from the first LABEL_SAMPLE labels (the archive
    member is read, and decompressed, only that far)."""
    shapes: dict[str, tuple[int, ...]] = {}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if not name.endswith(".npy"):
                continue
            with archive.open(name) as f:
                shapes[name.removesuffix(".npy")] = _npy_header(f)[0]
        y_key = target if target in shapes else "y"
        rest = [k for k in shapes if k != y_key]
        x_key = "x" if "x" in rest else (rest[0] if len(rest) == 1 else None)
        if x_key is None or not shapes[x_key]:
            raise ProbeError(f"{path}: expected arrays 'x' and 'y' (or {target!r}), found {sorted(shapes)}; "
                             "save with numpy.savez(path, x=..., y=...)")
        y = None
        if y_key in shapes:
            with archive.open(f"{y_key}.npy") as f:
                shape, dtype = _npy_header(f)
                if len(shape) == 1 and (dtype.kind in "iub" or dtype.kind == "U"):
                    count = min(shape[0], LABEL_SAMPLE)
                    y = np.frombuffer(f.read(count * dtype.itemsize), dtype)
    size = shapes[x_key][0]
    sample = _channels_first(shapes[x_key][1:])
    classes = None
    if y is not None:
        classes = _classes({str(v) for v in np.unique(y)[:MAX_CLASSES + 1]})
    detail = f"format npz, {size:,} samples, arrays {', '.join(f'{k} {_shape(v)}' for k, v in shapes.items())}"
    complete = y is None or len(y) == shapes[y_key][0]
    if classes:
        detail += ", " + _classes_text(classes, complete, f" in the first {len(y):,} labels")
    return ProbeResult("npz", size, sample or None, classes, list(shapes), detail, classes_exact=complete)


def _probe_npy(path: Path, target: str) -> ProbeResult:
    """Shape from the array's header (memory-mapped, nothing read); classes from the first LABEL_SAMPLE labels."""
    x = np.load(path, mmap_mode="r", allow_pickle=False)
    labels = next((p for p in (path.with_name(f"{target}.npy"), path.with_name("y.npy")) if p.exists() and p != path),
                  None)
    if labels is None:
        raise ProbeError(f"{path}: no labels beside it; save them as {path.with_name('y.npy')} (or {target}.npy)")
    y = np.load(labels, mmap_mode="r", allow_pickle=False)
    sample = _channels_first(tuple(int(d) for d in x.shape[1:]))
    classes = None
    if y.ndim == 1 and y.dtype.kind in "iub":
        classes = _classes({str(v) for v in np.unique(np.asarray(y[:LABEL_SAMPLE]))[:MAX_CLASSES + 1]})
    detail = f"format npy (memory-mapped), {len(x):,} samples of {_shape(x.shape[1:])} {x.dtype}, labels {labels.name}"
    complete = len(y) <= LABEL_SAMPLE
    if classes:
        detail += ", " + _classes_text(classes, complete, f" in the first {min(len(y), LABEL_SAMPLE):,} labels")
    return ProbeResult("npy", len(x), sample or None, classes, [path.name, labels.name], detail,
                       classes_exact=complete)


def _probe_shards(path: Path, skip: set[str] = frozenset()) -> ProbeResult:
    """WebDataset shards: the tar headers of the first shards, at most PROBE_MEMBERS members of at
    most PROBE_SHARDS shards, count the samples; beyond them the count is estimated from the shards'
    sizes. The first image's header gives the shape."""
    shards = sorted(p for p in path.iterdir() if p.suffix == ".tar" and p.name not in skip) if path.is_dir() else [path]
    count = members = 0
    covered = 0  # bytes of the shards that the members read span
    first: bytes | None = None
    complete = len(shards) <= PROBE_SHARDS
    for shard in shards[:PROBE_SHARDS]:
        with tarfile.open(shard, mode="r:") as tar:
            for member in tar:
                members += 1
                if member.isfile() and member.name.partition(".")[2].lower() in ("jpg", "jpeg", "png"):
                    count += 1
                    if first is None:
                        first = tar.extractfile(member).read()
                if members == PROBE_MEMBERS:
                    covered += member.offset_data + member.size
                    break
            else:
                covered += shard.stat().st_size
        if members == PROBE_MEMBERS:
            complete = False
            break
    if first is None:
        raise ProbeError(f"{path}: no KEY.jpg or KEY.png members in its first tar shards")
    from PIL import Image

    with Image.open(io.BytesIO(first)) as image:  # reads the header only
        width, height = image.size
        channels = CHANNELS_BY_MODE.get(image.mode, 3)
    size = count
    samples = f"{count:,} samples"
    if not complete:
        total = sum(shard.stat().st_size for shard in shards)  # the sizes only: no shard is opened
        size = round(count * total / max(1, covered))
        samples = f"about {size:,} samples (estimated from the first {count:,})"
    detail = f"format webdataset, {samples} in {len(shards)} shard(s), first image {width}x{height}"
    return ProbeResult("webdataset", size, (channels, height, width), None, [s.name for s in shards], detail,
                       size_exact=complete)


def _probe_image_folder(path: Path, skip: set[str] = frozenset()) -> ProbeResult:
    """The class folders are listed (file names only, nothing opened) and the first PROBE_IMAGES
    images decoded: the first that decodes gives the shape; one that does not is a warning. Members
    named in ``skip`` (links leading outside the data roots) are left out."""
    classes = sorted(p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in skip)
    if not classes:
        raise ProbeError(f"{path}: a folder source must hold one sub-folder of images per class; none found")
    count = 0
    firsts: list[Path] = []
    for name in classes:
        with os.scandir(path / name) as entries:
            found = sorted(e.name for e in entries if os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES
                           and f"{name}/{e.name}" not in skip and e.is_file())
        count += len(found)
        firsts += [path / name / f for f in found[:PROBE_IMAGES - len(firsts)]]
    if not firsts:
        raise ProbeError(f"{path}: no PNG or JPEG images in its class folders ({', '.join(classes[:5])} ...)")
    try:
        from PIL import Image
    except ImportError as exc:
        raise ProbeError("reading images needs pillow; pip install pillow") from exc
    shape: tuple[int, int, int, str] | None = None
    failed: list[tuple[Path, Exception]] = []
    for file in firsts:
        try:
            with Image.open(file) as image:
                image.load()  # decodes it: a damaged file fails here, as it would in training
                if shape is None:
                    shape = (CHANNELS_BY_MODE.get(image.mode, 3), image.size[1], image.size[0], image.mode)
        except (OSError, SyntaxError, ValueError) as exc:
            failed.append((file, exc))
    if shape is None:
        raise ProbeError(f"{failed[0][0]}: cannot read the image ({failed[0][1]})") from failed[0][1]
    warnings = [f"{file.relative_to(path)}: cannot read the image ({exc}); training would stop on it: replace it "
                "or delete it" for file, exc in failed]
    channels, height, width, mode = shape
    detail = (f"format image_folder, {count:,} images, {len(classes)} classes, first image "
              f"{width}x{height} {mode}")
    return ProbeResult("image_folder", count, (channels, height, width), len(classes), classes, detail, warnings)


# --------------------------------------------------------------------------- helpers


def _is_number(value: str) -> bool:
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def _numeric_arrow(pa: Any, kind: Any) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind))


def _classes(values: set[str]) -> int | None:
    """How many classes the target's distinct values make, or None when they look continuous."""
    if not values or len(values) > MAX_CLASSES:
        return None
    if all(_is_number(v) for v in values) and not all(float(v).is_integer() for v in values):
        return None  # fractional numbers: a regression target
    return len(values)


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _channels_first(sample: tuple[int, ...]) -> tuple[int, ...]:
    if len(sample) == 2:
        return (1, *sample)  # (N, H, W) grey images
    if len(sample) == 3 and sample[-1] in (1, 3, 4) and sample[0] not in (1, 3, 4):
        return (sample[2], sample[0], sample[1])  # channels last
    return sample


def _classes_text(classes: int | None, complete: bool, within: str) -> str:
    """"3 classes", or "at least 3 classes in the first 10,000 rows" when not every label was read."""
    if not classes:
        return ""
    return f"{classes} classes" if complete else f"at least {classes} classes{within}"


def _detail(fmt: str, rows: str, columns: int, features: int, classes: str, target: str | None) -> str:
    text = f"format {fmt}, {rows}, {columns} columns ({features} numeric features"
    text += f", target {target!r}" if target else ", no target column"
    text += ")"
    if classes:
        text += f", {classes}"
    return text
