"""Members of a folder data source that a symbolic link leads somewhere else.

A folder source (an image folder, a folder of WebDataset shards) is pinned when a run is submitted:
its own real path must lie inside the user's data roots. Its members are files and class folders
that anyone who can write to the folder may replace by links (``cat/x.jpg -> /other/user/img.jpg``,
``cat -> /other/user/images``), which the pinning of the folder does not see. :func:`links_leaving`
lists the members whose real path leaves what is allowed, so submission refuses them
(:mod:`schedulers.pinning`) and the portal's data probe leaves them out with a warning; the
generated program skips a member link that leaves its pinned folder (``templates/common/_streamed.py.j2``).

Only links are resolved (``scandir`` tells them apart without a system call per file), so a folder of a
million plain files costs one listing, as the generated program's own listing does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

DEPTH = 2  # the folder's entries and theirs: class folders and their images, or shards


def inside(roots: Sequence[Path]) -> Callable[[Path], bool]:
    """Whether a real path lies in one of ``roots`` (resolved folders)."""
    return lambda real: any(real == root or real.is_relative_to(root) for root in roots)


def links_leaving(folder: Path, allowed: Callable[[Path], bool], depth: int = DEPTH) -> list[tuple[str, Path]]:
    """(member relative to ``folder``, its real path) of every symbolic link among the members down to
    ``depth`` levels whose real path is not ``allowed``, sorted. A link that is allowed and leads to a
    folder is looked into too (the program lists it)."""
    found: list[tuple[str, Path]] = []

    def walk(path: str, prefix: str, left: int) -> None:
        try:
            with os.scandir(path) as listing:
                entries = list(listing)
        except OSError:
            return  # unreadable: the program and the probe say so themselves
        for entry in entries:
            member = prefix + entry.name
            if entry.is_symlink():
                real = Path(os.path.realpath(entry.path))
                if not allowed(real):
                    found.append((member, real))
                    continue
            if left > 1 and entry.is_dir():
                walk(entry.path, member + "/", left - 1)

    walk(str(folder), "", depth)
    return sorted(found)


def describe(leaving: list[tuple[str, Path]], shown: int = 5) -> str:
    """``cat/x.jpg -> /other/img.jpg, …`` for a message (the first ``shown``, then a count)."""
    text = ", ".join(f"{member} -> {real}" for member, real in leaving[:shown])
    return text + (f" and {len(leaving) - shown:,} more" if len(leaving) > shown else "")
