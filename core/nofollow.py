"""Walking a folder tree one component at a time, never through a symbolic link.

A path checked first and opened later can be swapped in between (a folder replaced by a link to
someone else's). These helpers hold an open folder (a file descriptor) and open each next component
relative to it (``dir_fd``) with ``O_NOFOLLOW``, so a link anywhere on the way is met, not followed:
:class:`LinkInTheWay` names it. Writers, deleters and readers of folders other people can write to
(a data folder, a run folder) go through here.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO never hangs
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkInTheWay(OSError):
    """A symbolic link (or something else that is not a folder or file) where the walk needed one."""

    def __init__(self, path: Path, what: str = "is a symbolic link") -> None:
        super().__init__(errno.ELOOP, what, str(path))
        self.path = path
        self.what = what


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir(base_fd: int, parts: Sequence[str], where: Path, create: bool = False) -> int:
    """A new descriptor of the folder ``parts`` below ``base_fd`` (``where`` names ``base_fd`` in
    messages). ``create``: make missing folders on the way. :class:`LinkInTheWay` for a link or a
    non-folder on the way; ``FileNotFoundError`` for a missing one (without ``create``)."""
    fd = os.dup(base_fd)
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                here = where.joinpath(*parts[:i + 1])
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(part, fd)):
                    raise LinkInTheWay(here) from None
                if exc.errno == errno.ENOTDIR:
                    raise LinkInTheWay(here, "is not a folder") from None
                raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file(dir_fd: int, name: str, where: Path) -> int:
    """A read descriptor of the regular file ``name`` in ``dir_fd``, checked on the open file (``fstat``):
    :class:`LinkInTheWay` for a link or anything that is not a regular file."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkInTheWay(where / name) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LinkInTheWay(where / name, "is not a regular file")
    os.set_blocking(fd, True)
    return fd


def open_below(root: Path, rel: Sequence[str]) -> int:
    """A read descriptor of the regular file ``root/rel…``: ``root`` and every further component opened
    without following a link (:class:`LinkInTheWay`; the folders above ``root`` are the caller's)."""
    if not rel:
        raise ValueError("no file named below the folder")
    try:
        top = os.open(root, DIR_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and os.path.islink(root)):
            raise LinkInTheWay(root) from None
        raise
    try:
        folder = open_dir(top, rel[:-1], root)
    finally:
        os.close(top)
    try:
        return open_file(folder, rel[-1], root.joinpath(*rel[:-1]))
    finally:
        os.close(folder)
