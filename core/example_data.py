"""Small example data in the layout a pipeline's data layer expects, so a template runs as shipped.

``write_example_data(spec, root, record=...)`` writes under ``root / spec.data.source``: a data root
that holds it makes the pipeline runnable (submission resolves the relative source under the user's
data roots and the program reads that absolute path). The samples carry a learnable signal (each
class has its own mean colour, or its own words) under random noise, so a short run shows the loss
falling; they are not a benchmark. Sizes stay small: about ``samples`` samples in all, at least
``per_class`` of each class.

What FlowTrain wrote is kept in the user's own record (:func:`record_path`: a JSON file under the
FlowTrain home, never in the data folder, which anyone who can write there could forge): every file
with its size and SHA-256. Writing again deletes only files the record names whose size and digest
still match; a file changed since is the user's (kept, and named); anything else already where a
file would go is refused with a problem naming it, never overwritten. Nothing is written or deleted
through a symbolic link: the folders are walked from the root one component at a time with
``O_NOFOLLOW`` (:mod:`core.nofollow`), files are created with ``O_EXCL``, and a link on the way is
refused with a problem naming it. The command line (``python -m flowtrain example-data``) and the
portal's "Generate example data" both write here.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from core import example_shapes, token_stream
from core.errors import Problem, SpecError
from core.mapping.data import resolve_format
from core.nofollow import CREATE_FLAGS, LinkInTheWay, open_dir, open_file
from core.spec import DataSpec, PipelineSpec, Resize, Tokenize

SHARD_SIZE = 100  # samples per WebDataset shard
WORDS = ("good", "great", "fine", "bad", "poor", "awful", "plot", "actor", "film", "scene", "music", "story")

RECORD_FOLDER = "example-data"  # under the FlowTrain home: one record per user
RECORD_VERSION = 1
WRITABLE_FORMATS = ("image_folder", "webdataset", "csv", "npy", "npz")
FOLDER_FORMATS = ("image_folder", "webdataset")
MAX_NAMED = 20  # refused paths named one by one; past them, a count
_HEX64 = re.compile(r"[0-9a-f]{64}")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")


@dataclass(frozen=True)
class ExampleData:
    path: Path  # what the data layer's source names, under the root
    samples: int
    detail: str  # one human line: "1,000 JPEG images in 1000 class folders (224×224)"
    files: int = 0  # data files written
    size_bytes: int = 0
    kept: tuple[Path, ...] = field(default=())  # files of earlier example data changed since: the user's now

    @property
    def amount(self) -> str:
        """How much was written: "1,000 files, 40.2 MB"."""
        size, unit = float(self.size_bytes), "B"
        for bigger in ("kB", "MB", "GB"):
            if size < 1024:
                break
            size, unit = size / 1024, bigger
        return f"{self.files:,} file{'s' if self.files != 1 else ''}, {size:.{0 if unit == 'B' else 1}f} {unit}"


def record_path(home: Path, user: str) -> Path:
    """The record of the example data FlowTrain wrote for ``user``: ``<home>/example-data/<user>.json``."""
    if not _USER.fullmatch(user):
        raise ValueError(f"user name {user!r:.80} cannot name a record file")
    return home / RECORD_FOLDER / f"{user}.json"


def example_target(data: DataSpec) -> tuple[PurePosixPath, str]:
    """The relative path and the format example data for ``data`` would have; SpecError when there is
    none to write (a built-in dataset, an absolute source, a format FlowTrain cannot write)."""
    if data.source.startswith("sklearn:"):
        raise SpecError([Problem("data.source", "is a built-in dataset: it needs no example data",
                                 received=data.source)])
    relative = PurePosixPath(data.source)
    if (relative.is_absolute() or ".." in relative.parts or data.source.startswith("~") or "\x00" in data.source
            or not relative.parts or relative.parts == (".",)):
        raise SpecError([Problem("data.source", "example data is written under the root, so the source must be "
                                 "a relative path without '..'", received=data.source)])
    if data.task == "language_modeling":
        return relative, "tokens"
    fmt = resolve_format(data.source, data.format)
    if fmt not in WRITABLE_FORMATS:
        raise SpecError([Problem("data.format", "FlowTrain cannot write example data of this format", received=fmt,
                                 expected=", ".join(WRITABLE_FORMATS[:-1]) + " or " + WRITABLE_FORMATS[-1])])
    return relative, fmt


def write_example_data(spec: PipelineSpec, root: Path, *, record: Path, samples: int = 300, per_class: int = 1,
                       seed: int = 0) -> ExampleData:
    """Write example data for ``spec`` under ``root`` and note it in ``record`` (:func:`record_path`).

    SpecError, with every refused path as a problem and nothing deleted or written, when the data layer
    names none to write, when something FlowTrain did not write (or changed since) is where a file would
    go, or when a symbolic link is on the way.
    """
    data = spec.data
    relative, fmt = example_target(data)
    classes = 1 if data.task == "language_modeling" else data.num_classes or 2
    count = max(samples, classes * per_class)
    labels = np.arange(count) % classes
    root.mkdir(parents=True, exist_ok=True)
    top = Path(os.path.realpath(root))  # the root itself is the caller's (confined) choice; below it, no link
    path = top / relative
    folder = relative.parts if fmt in FOLDER_FORMATS else relative.parent.parts
    base = top.joinpath(*folder)
    segmenting = data.task == "segmentation"  # images with masks: core/example_shapes.py
    names = (example_shapes.file_names(fmt, path, count, data.mask_folder) if segmenting
             else _file_names(fmt, path, labels, classes))
    with _record_book(record) as book:
        earlier = _entry(book, str(path), record)
        top_fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            ours, kept = _survey(top_fd, top, folder, earlier, names, fmt)
            written: dict[str, dict[str, int | str]] = {}
            try:
                base_fd = _open_or_refuse(top_fd, folder, top, create=True)
                try:
                    _remove(base_fd, base, ours)
                    rng = np.random.default_rng(seed)
                    for name, blob in (example_shapes.blobs(spec, fmt, path, count, rng, _image_shape(spec))
                                       if segmenting else _blobs(spec, fmt, path, labels, rng, classes)):
                        _create(base_fd, base, name, blob)
                        written[name] = {"size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
                finally:
                    os.close(base_fd)
            finally:  # what was written is FlowTrain's, even when the writing stopped half-way
                book["written"][str(path)] = {"format": fmt, "files": written}
                _save_book(record, book)
        finally:
            os.close(top_fd)
    size = sum(int(f["size"]) for f in written.values())
    detail = (example_shapes.detail(fmt, count, classes, _image_shape(spec)) if segmenting
              else _detail(spec, fmt, count, classes, len(names)))
    return ExampleData(path, count, detail, len(written), size,
                       tuple(base / name for name in kept))


def _detail(spec: PipelineSpec, fmt: str, count: int, classes: int, files: int) -> str:
    if fmt in FOLDER_FORMATS:
        shape = _image_shape(spec)
        where = f"in {classes} class folders" if fmt == "image_folder" else f"in {files} WebDataset shard(s)"
        return f"{count:,} JPEG images {where} ({shape[1]}×{shape[2]})"
    if fmt == "csv":
        return f"a CSV table of {count:,} rows"
    if fmt == "tokens":
        return f"a token stream of {count:,} windows of {spec.data.block_size} tokens ({token_stream.kind(spec.data.source)})"
    return f"{count:,} samples of shape {tuple(spec.data.input_shape or [4])} ({fmt})"


def _file_names(fmt: str, path: Path, labels: np.ndarray, classes: int) -> list[str]:
    """The data files example data consists of, relative to the folder that holds them."""
    if fmt == "image_folder":
        width = len(str(classes - 1))
        return [f"class{k:0{width}d}/{i:06d}.jpg" for i, k in enumerate(labels)]
    if fmt == "webdataset":
        return [f"shard-{start // SHARD_SIZE:06d}.tar" for start in range(0, len(labels), SHARD_SIZE)]
    return [path.name, "y.npy"] if fmt == "npy" else [path.name]  # tokens: the one stream


# --------------------------------------------------------------------------- the record


@contextmanager
def _record_book(record: Path) -> Iterator[dict]:
    """The user's record, loaded under a lock held until the block ends (two writes never interleave)."""
    record.parent.mkdir(parents=True, exist_ok=True)
    with open(record.with_name(record.name + ".lock"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            text = record.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        except (OSError, UnicodeDecodeError) as exc:
            raise _record_problem(record, f"cannot be read ({exc})") from None
        try:
            book = {"version": RECORD_VERSION, "written": {}} if text is None else json.loads(text)
        except json.JSONDecodeError:
            book = None
        if not isinstance(book, dict) or book.get("version") != RECORD_VERSION or not isinstance(
                book.get("written"), dict):
            raise _record_problem(record, "is not a record FlowTrain can read")
        yield book


def _save_book(record: Path, book: dict) -> None:
    spare = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    spare.write_text(json.dumps(book, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(spare, record)


def _record_problem(record: Path, why: str) -> SpecError:
    return SpecError([Problem("data.source", f"the record of the example data FlowTrain wrote for you ({record}) "
                              f"{why}, so no earlier example data can be replaced", received=str(record),
                              fix="ask the administrator to move the record away; data it named is then treated "
                              "as yours and never overwritten")])


def _entry(book: dict, key: str, record: Path) -> dict[str, tuple[int, str]]:
    """The files the record names for the data at ``key``: name -> (size, SHA-256)."""
    entry = book["written"].get(key)
    if entry is None:
        return {}
    files = entry.get("files") if isinstance(entry, dict) else None
    out: dict[str, tuple[int, str]] = {}
    for name, facts in (files.items() if isinstance(files, dict) else [(None, None)]):
        size = facts.get("size") if isinstance(facts, dict) else None
        digest = facts.get("sha256") if isinstance(facts, dict) else None
        parts = PurePosixPath(name).parts if isinstance(name, str) and name else ()
        if (not parts or PurePosixPath(name).is_absolute() or any(p in ("..", ".") for p in parts)
                or not isinstance(size, int) or size < 0 or not isinstance(digest, str)
                or not _HEX64.fullmatch(digest)):
            raise _record_problem(record, f"names {name!r:.100} for {key} in a way FlowTrain does not write")
        out[name] = (size, digest)
    return out


# --------------------------------------------------------------------------- what is there


def _split(name: str) -> tuple[tuple[str, ...], str]:
    parts = PurePosixPath(name).parts
    return parts[:-1], parts[-1]


def _refuse(path: Path, why: str) -> Problem:
    return Problem("data.source", f"{path} {why}; it is left as it is (FlowTrain never overwrites data it did not "
                   "write)", received=str(path), fix="if it is your data, choose it as the source; to write example "
                   "data, move it away or name another source")


def _link_problem(err: LinkInTheWay) -> Problem:
    return Problem("data.source", f"{err.path} {err.what}; FlowTrain never writes or deletes through one, so "
                   "nothing was written or deleted", received=str(err.path),
                   fix="remove the link (or move it away), or name another source")


def _refusal(problems: list[Problem]) -> SpecError:
    shown = problems[:MAX_NAMED]
    if len(problems) > MAX_NAMED:
        shown.append(Problem("data.source", f"and {len(problems) - MAX_NAMED:,} more paths refused like these"))
    return SpecError(shown)


def _open_or_refuse(top_fd: int, parts: tuple[str, ...], where: Path, create: bool = False) -> int:
    try:
        return open_dir(top_fd, parts, where, create=create)
    except LinkInTheWay as err:
        raise _refusal([_link_problem(err)]) from None


def _sub(base_fd: int, parts: tuple[str, ...], base: Path, problems: dict[Path, Problem]) -> int | None:
    """The sub-folder ``parts`` of the data folder, None when missing or a link (then noted in ``problems``)."""
    try:
        return open_dir(base_fd, parts, base)
    except FileNotFoundError:
        return None
    except LinkInTheWay as err:
        problems.setdefault(err.path, _link_problem(err))
        return None


def _matches(fd: int, size: int, digest: str) -> bool:
    with os.fdopen(fd, "rb") as fh:
        if os.fstat(fh.fileno()).st_size != size:
            return False
        sha = hashlib.sha256()
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
        return sha.hexdigest() == digest


def _survey(top_fd: int, top: Path, folder: tuple[str, ...], earlier: dict[str, tuple[int, str]],
            names: list[str], fmt: str) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """What is there now: the recorded files unchanged (name -> (device, inode)) and the recorded files
    changed since (kept); SpecError with every path in the way, before anything is touched."""
    base = top.joinpath(*folder)
    try:
        base_fd = open_dir(top_fd, folder, top)
    except FileNotFoundError:
        return {}, []  # nothing there yet
    except LinkInTheWay as err:
        raise _refusal([_link_problem(err)]) from None
    problems: dict[Path, Problem] = {}
    ours: dict[str, tuple[int, int]] = {}
    changed: dict[str, str] = {}
    try:
        if not earlier and fmt in FOLDER_FORMATS and os.listdir(base_fd):
            raise _refusal([_refuse(base, "already exists and is not FlowTrain example data")])
        for name, (size, digest) in earlier.items():
            parts, leaf = _split(name)
            sub = _sub(base_fd, parts, base, problems)
            if sub is None:
                continue
            try:
                fd = open_file(sub, leaf, base.joinpath(*parts))
                st = os.fstat(fd)
                if _matches(fd, size, digest):
                    ours[name] = (st.st_dev, st.st_ino)
                else:
                    changed[name] = "was written by FlowTrain but has changed since (its size or digest differs)"
            except FileNotFoundError:
                pass
            except LinkInTheWay as err:
                changed[name] = f"was written by FlowTrain but now {err.what}"
            finally:
                os.close(sub)
        for name in names:
            if name in ours:
                continue
            parts, leaf = _split(name)
            sub = _sub(base_fd, parts, base, problems)
            if sub is None:
                continue
            try:
                os.stat(leaf, dir_fd=sub, follow_symlinks=False)
            except FileNotFoundError:
                continue
            finally:
                os.close(sub)
            why = changed.get(name, "already exists and is not FlowTrain example data")
            problems.setdefault(base / name, _refuse(base / name, why))
    finally:
        os.close(base_fd)
    if problems:
        raise _refusal(list(problems.values()))
    return ours, sorted(set(changed) - set(names))


def _remove(base_fd: int, base: Path, ours: dict[str, tuple[int, int]]) -> None:
    """Delete the recorded files found unchanged (the same file the survey read: device and inode), then
    the folders they leave empty; never through a link."""
    for name, identity in ours.items():
        parts, leaf = _split(name)
        try:
            sub = open_dir(base_fd, parts, base)
        except (FileNotFoundError, LinkInTheWay):
            continue  # swapped since the survey: not deleted
        try:
            st = os.stat(leaf, dir_fd=sub, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == identity:
                os.unlink(leaf, dir_fd=sub)
        except FileNotFoundError:
            pass
        finally:
            os.close(sub)
    for parts in sorted({_split(n)[0] for n in ours if _split(n)[0]}, key=len, reverse=True):
        for depth in range(len(parts), 0, -1):
            try:
                parent = open_dir(base_fd, parts[:depth - 1], base)
            except (FileNotFoundError, LinkInTheWay):
                break
            try:
                os.rmdir(parts[depth - 1], dir_fd=parent)
            except OSError:
                break  # not empty (the user's files stay), or not a folder
            finally:
                os.close(parent)


def _create(base_fd: int, base: Path, name: str, blob: bytes) -> None:
    """Write a new file (``O_EXCL``: never over one that appeared since the survey; no link followed)."""
    parts, leaf = _split(name)
    try:
        sub = open_dir(base_fd, parts, base, create=True)
    except LinkInTheWay as err:
        raise _refusal([_link_problem(err)]) from None
    try:
        fd = os.open(leaf, CREATE_FLAGS, 0o666, dir_fd=sub)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ELOOP):
            raise _refusal([_refuse(base / name, "appeared while the example data was written")]) from None
        raise
    finally:
        os.close(sub)
    with os.fdopen(fd, "wb") as fh:
        fh.write(blob)


# --------------------------------------------------------------------------- the samples


def _blobs(spec: PipelineSpec, fmt: str, path: Path, labels: np.ndarray, rng: np.random.Generator,
           classes: int) -> Iterator[tuple[str, bytes]]:
    """(file name, contents) of every data file, in the order :func:`_file_names` lists them."""
    data = spec.data
    names = _file_names(fmt, path, labels, classes)
    if fmt == "image_folder":
        shape = _image_shape(spec)
        for k, name in zip(labels, names):
            yield name, example_shapes.encoded(_image(rng, int(k), classes, shape), "JPEG", quality=90)
    elif fmt == "webdataset":
        shape = _image_shape(spec)
        images = [example_shapes.encoded(_image(rng, int(k), classes, shape), "JPEG", quality=90) for k in labels]
        for name, start in zip(names, range(0, len(labels), SHARD_SIZE)):
            yield name, _shard(labels, images, start)
    elif fmt == "csv":
        yield names[0], _csv(data, labels, rng, classes).encode("utf-8")
    elif fmt == "tokens":
        yield names[0], _token_stream(data, len(labels), rng)
    else:
        shape = tuple(data.input_shape or [4])
        x = (rng.normal(0, 1, (len(labels), *shape)) + labels.reshape(-1, *[1] * len(shape))).astype(np.float32)
        buffer = io.BytesIO()
        if fmt == "npy":
            np.save(buffer, x)
            yield names[0], buffer.getvalue()
            buffer = io.BytesIO()
            np.save(buffer, labels)
            yield names[1], buffer.getvalue()
        else:
            np.savez(buffer, x=x, y=labels)
            yield names[0], buffer.getvalue()


def _token_stream(data: DataSpec, windows: int, rng: np.random.Generator) -> bytes:
    """``windows`` blocks of tokens and one more: sentences of WORDS (a text file, read as bytes), or as token
    ids of a ``.npy``/``.bin`` stream, each word one id (so a model can learn which word follows which)."""
    block, vocab = int(data.block_size or 64), int(data.vocab_size or 256)
    need = windows * block + 1
    how = token_stream.kind(data.source)
    if how == "bytes":
        text = bytearray()
        while len(text) < need:
            k = int(rng.integers(len(WORDS)))
            text += f"the {WORDS[k]} {WORDS[(k + 3) % len(WORDS)]} is {WORDS[(k + 7) % len(WORDS)]}. ".encode()
        return bytes(text[:need])
    start = rng.integers(vocab, size=need // 4 + 1)  # short runs of consecutive ids: id i is followed by i + 1
    ids = ((start[:, None] + np.arange(4)) % vocab).reshape(-1)[:need].astype(np.uint16)
    if how == "bin":
        return ids.astype("<u2").tobytes()
    buffer = io.BytesIO()
    np.save(buffer, ids)
    return buffer.getvalue()


def _csv(data: DataSpec, labels: np.ndarray, rng: np.random.Generator, classes: int) -> str:
    column = next((p.column for p in data.preprocessing if isinstance(p, Tokenize)), None)
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    if column is not None:
        writer.writerow([column, data.target])
        for k in labels:
            writer.writerow([_sentence(rng, int(k), classes), f"class{k}"])
    else:
        features = (data.input_shape or [4])[0]
        writer.writerow([*(f"x{j}" for j in range(features)), data.target])
        for k in labels:
            writer.writerow([*np.round(rng.normal(k, 1.0, features), 4), int(k)])
    return out.getvalue()


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


def _sentence(rng: np.random.Generator, k: int, classes: int) -> str:
    """Words drawn mostly from the class's own share of WORDS."""
    own = [w for i, w in enumerate(WORDS) if i % classes == k] or list(WORDS)
    return " ".join(rng.choice(own if rng.random() < 0.8 else WORDS) for _ in range(rng.integers(4, 12)))


def _shard(labels: np.ndarray, images: list[bytes], start: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(start, min(start + SHARD_SIZE, len(labels))):
            for name, data in ((f"{i:06d}.jpg", images[i]), (f"{i:06d}.cls", str(int(labels[i])).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
