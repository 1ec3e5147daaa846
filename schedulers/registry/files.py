"""The files of a run directory, read the safe way: metrics tailing, the log's tail, the artifact
listing, and opening one artifact.

A run directory is written by the training job; nothing in it is trusted. Symbolic links are never
followed: the listing skips them (and does not descend into linked folders), and every file is
opened with ``O_NOFOLLOW`` after checking that no folder on the way is a link. A link planted in a
run directory therefore cannot make the portal read, list or hand out any other file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from core.nofollow import DIR_FLAGS, LinkInTheWay, open_below, open_file

ONNX_NAME = "model.onnx"  # FlowTrain's export of a completed run (schedulers/model_export.py)
ONNX_MODEL_FILES = (ONNX_NAME, ONNX_NAME + ".data")  # the model, and its weights when they exceed 1 GiB
CODE_FILES = {"train.py", "model.py", "data.py", "devices.py", "optim.py", "runtime.py", "loop.py", "spec.json", "manifest.json",
              "job.sbatch"}


@dataclass(frozen=True)
class Artifact:
    kind: str  # code | log | metrics | checkpoint | model | other
    path: str  # relative to the run directory
    size: int
    mtime: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MAX_RESULT_BYTES = 16 * 1024 * 1024


def open_no_follow(path: Path) -> BinaryIO:
    """``open(path, "rb")`` that refuses a symbolic link as the last component (``O_NOFOLLOW``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(21, "not a regular file", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _is_link(exc: OSError) -> bool:
    """``O_NOFOLLOW`` met a symbolic link (Linux: ELOOP)."""
    return exc.errno in (errno.ELOOP, errno.EMLINK)


def list_artifacts(root: Path) -> list[Artifact]:
    """Regular files under ``root`` by kind, without following or listing symbolic links; hidden
    files, ``__pycache__`` and ``*.tmp`` are left out."""
    out = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                         and not (base / d).is_symlink())
        for name in sorted(files):
            if name.startswith(".") or name.endswith(".tmp"):
                continue
            try:
                st = (base / name).lstat()
            except FileNotFoundError:
                continue  # removed while listing
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = (base / name).relative_to(root).as_posix()
            out.append(Artifact(classify(rel), rel, st.st_size, st.st_mtime))
    return sorted(out, key=lambda a: a.path)


def open_artifact(root: Path, rel: str) -> BinaryIO:
    """One file of the run directory ``root`` (``rel`` as :func:`list_artifacts` gives it), opened for
    reading. ``ValueError`` for a path that leaves the directory or passes a symbolic link;
    ``OSError`` when it cannot be opened."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"{rel!r} is not a path inside the run directory")
    try:  # walked from the run directory one folder at a time (dir_fd): no check-then-open gap
        return os.fdopen(open_below(root, parts), "rb")
    except LinkInTheWay as err:
        raise ValueError(f"{rel!r} goes through a symbolic link ({err.path} {err.what})") from None


def read_result(path: Path) -> dict[str, Any] | None:
    """The program's ``result.json``; ``None`` when absent. ``ValueError``/``OSError`` when unreadable
    (a symbolic link counts as unreadable)."""
    try:
        with open_no_follow(path) as fh:
            doc = json.loads(fh.read(MAX_RESULT_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    return doc if isinstance(doc, dict) else None


@dataclass(frozen=True)
class MetricsChunk:
    records: list[dict[str, Any]]
    offset: int  # where the next read starts
    reset: bool = False  # the file became shorter than the offset: it was replaced, read from 0
    bad_lines: int = 0


def read_metrics(path: str | Path, offset: int = 0, max_bytes: int = 64 * 1024 * 1024) -> MetricsChunk:
    """The whole lines of ``metrics.jsonl`` after byte ``offset`` (a portal tails the file with this).

    A last line without its newline is left for the next call (the writer is mid-line). A line that
    is not JSON (a write cut short by a killed process) is counted in ``bad_lines`` and skipped.
    """
    try:
        fh = open_no_follow(Path(path))
    except FileNotFoundError:
        return MetricsChunk([], 0, reset=offset > 0)
    except OSError as exc:
        if not _is_link(exc):
            raise
        return MetricsChunk([], 0, reset=offset > 0)  # a link is never read
    with fh:
        size = os.fstat(fh.fileno()).st_size
        reset = size < offset
        if reset:
            offset = 0
        if size == offset:
            return MetricsChunk([], offset, reset)
        fh.seek(offset)
        data = fh.read(min(size - offset, max_bytes))
    end = data.rfind(b"\n")
    if end < 0:
        return MetricsChunk([], offset, reset)
    records: list[dict[str, Any]] = []
    bad = 0
    for line in data[: end + 1].splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            bad += 1
            continue
        if isinstance(rec, dict):
            records.append(rec)
        else:
            bad += 1
    return MetricsChunk(records, offset + end + 1, reset, bad)


def classify(rel: str) -> str:
    parts = rel.split("/")
    name = parts[-1]
    if parts[0] == "checkpoints":
        return "checkpoint"
    if parts[0] == "model" or rel in ONNX_MODEL_FILES:
        return "model"
    if name in ("metrics.jsonl", "result.json"):
        return "metrics"
    if name == "run.log" or (name.startswith("slurm-") and name.endswith(".out")) or name.endswith(".log") \
            or parts[0] == "log":
        return "log"
    if len(parts) == 1 and (name in CODE_FILES or name.endswith(".py")):
        return "code"
    return "other"


def tail_file(path: Path, lines: int, max_bytes: int = 1 << 20) -> str:
    """The last ``lines`` lines of a text file (reads at most ``max_bytes`` from its end; a symbolic
    link is not followed)."""
    try:
        with open_no_follow(path) as fh:
            return tail_of(fh, lines, max_bytes)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if not _is_link(exc):
            raise
        return ""  # a link is never read


def tail_of(fh: BinaryIO, lines: int, max_bytes: int = 1 << 20) -> str:
    """The last ``lines`` lines of an open file (at most ``max_bytes`` read from its end)."""
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(max(size - max_bytes, 0))
    text = fh.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:]) if lines > 0 else ""


def open_log(root: Path, names: list[str]) -> tuple[str, BinaryIO] | None:
    """The first of ``names`` (files directly in the run directory ``root``) that exists, opened once:
    the directory without following a link, then the file relative to it with ``O_NOFOLLOW``, checked on
    the open descriptor (``fstat``: a regular file), so no check-then-open gap lets a link swapped in
    be read. ``ValueError`` naming a link (or anything but a regular file) met on the way; ``None``
    when none of them exists."""
    try:
        top = os.open(root, DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if _is_link(exc) or exc.errno == errno.ENOTDIR:
            raise ValueError(f"the run directory {root} is not a folder (a symbolic link?); nothing in it is read") from None
        raise
    try:
        for name in names:
            try:
                return name, os.fdopen(open_file(top, name, root), "rb")
            except FileNotFoundError:
                continue
            except LinkInTheWay as err:
                raise ValueError(f"{name} {err.what}; a log that is not a regular file of the run directory is "
                                 "never read") from None
        return None
    finally:
        os.close(top)
