"""A user's named drafts: the editor's document and its undo/redo history, kept on the server.

Each draft is one JSON file ``<home>/drafts/<user>/<id>.json`` (folders 0700, files 0600), written
atomically (a temporary file in the same folder, then ``os.replace``), so a reload, a new tab or a
portal restart finds the work as it was after the last change. Every save carries the revision it
was based on; a save from an older revision (another tab saved in between) is refused with
:class:`DraftConflict`, never written over the newer one. ``last_open`` names the draft a new
session opens. No Streamlit here: :mod:`portal.drafts_view` draws it.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import FlowTrainError
from settings.access import check_user_name

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
FORMAT = "flowtrain-draft"
FORMAT_VERSION = 1
MAX_NAME = 80
_LAST_OPEN = "last_open"
_LOCK = ".lock"


class DraftError(FlowTrainError):
    """A draft cannot be read, found or named as asked; the message says which and what to do."""


class DraftConflict(DraftError):
    """The draft was saved elsewhere (another tab) since this editor read it."""

    def __init__(self, name: str, theirs: int, mine: int) -> None:
        self.theirs = theirs
        self.mine = mine
        super().__init__(f"The draft {name!r} was saved from another tab or window (revision {theirs}; this one is "
                         f"based on revision {mine}). Your latest changes are not saved: reload the saved draft, or "
                         "save yours as a copy.")


@dataclass(frozen=True)
class DraftInfo:
    """One draft as the list shows it; ``problem`` says why a file could not be read (it stays on disk)."""

    id: str
    name: str
    revision: int
    saved_at: float
    problem: str = ""


@dataclass
class DraftState:
    """What a draft holds: the editor's document, its undo history (oldest first) and redo stack."""

    doc: dict[str, Any]
    history: list[str]
    future: list[str]


def clean_name(name: str) -> str:
    """A draft's name: stripped, at most :data:`MAX_NAME` characters; an empty one is refused."""
    name = " ".join(str(name).split())
    if not name:
        raise DraftError("A draft needs a name: type one (letters, digits, spaces; at most 80 characters).")
    return name[:MAX_NAME]


class DraftStore:
    """The drafts of one user under ``home``."""

    def __init__(self, home: str | Path, user: str) -> None:
        self.user = check_user_name(user)
        self.dir = Path(home) / "drafts" / self.user

    # ------------------------------------------------------------------ files

    def _ensure_dir(self) -> None:
        self.dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        os.chmod(self.dir, PRIVATE_DIR)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time for this user's drafts (tabs are threads of one portal, or portals)."""
        self._ensure_dir()
        fd = os.open(self.dir / _LOCK, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _path(self, draft_id: str) -> Path:
        if not draft_id.isalnum():
            raise DraftError(f"No draft {draft_id!r}: a draft id has only letters and digits.")
        return self.dir / f"{draft_id}.json"

    def _write(self, path: Path, record: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".draft-", suffix=".tmp")
        try:
            os.fchmod(fd, PRIVATE_FILE)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                # one string (json.dumps: the C encoder), not json.dump: that streams through the pure-Python
                # encoder, 0.4 s for a 500-node draft on every change (docs/performance.md)
                f.write(json.dumps(record))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _read(self, draft_id: str) -> dict[str, Any]:
        path = self._path(draft_id)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DraftError(f"No draft {draft_id!r} (it was deleted, perhaps from another tab): open another "
                             "one or start a new one.") from None
        except (OSError, ValueError) as exc:
            raise DraftError(f"The draft file {path} cannot be read ({exc}); it is left as it is. Open another "
                             "draft, or move the file away.") from None
        if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("doc"), dict):
            raise DraftError(f"{path} is not a FlowTrain draft (expected a JSON object with format {FORMAT!r}); "
                             "it is left as it is.")
        return record

    @staticmethod
    def _info(record: dict[str, Any]) -> DraftInfo:
        return DraftInfo(str(record["id"]), str(record.get("name") or record["id"]), int(record.get("revision", 0)),
                         float(record.get("saved_at", 0.0)))

    # ------------------------------------------------------------------ the list

    def list(self) -> list[DraftInfo]:
        """Every draft, the last saved first; a file that cannot be read is listed with its problem."""
        if not self.dir.is_dir():
            return []
        out = []
        for path in self.dir.glob("*.json"):
            try:
                out.append(self._info(self._read(path.stem)))
            except (DraftError, KeyError, TypeError, ValueError) as err:
                out.append(DraftInfo(path.stem, path.stem, 0, path.stat().st_mtime, problem=str(err)))
        return sorted(out, key=lambda d: d.saved_at, reverse=True)

    def load(self, draft_id: str) -> tuple[DraftInfo, DraftState]:
        record = self._read(draft_id)
        history = [h for h in record.get("history") or [] if isinstance(h, str)]
        future = [h for h in record.get("future") or [] if isinstance(h, str)]
        return self._info(record), DraftState(record["doc"], history, future)

    def create(self, name: str, state: DraftState, named: bool = False) -> DraftInfo:
        """A new draft holding ``state`` (revision 1). Until it is ``named`` (by the user), a draft is
        called by its pipeline's name."""
        record = {"format": FORMAT, "version": FORMAT_VERSION, "id": secrets.token_hex(6), "name": clean_name(name),
                  "named": named, "revision": 1, "saved_at": time.time(), "doc": state.doc, "history": state.history,
                  "future": state.future}
        with self._locked():
            self._write(self._path(record["id"]), record)
        return self._info(record)

    def save(self, draft_id: str, state: DraftState, base_revision: int) -> DraftInfo:
        """Write ``state`` as the next revision; :class:`DraftConflict` when the file is no longer at
        ``base_revision`` (saved from elsewhere), :class:`DraftError` when it is gone."""
        with self._locked():
            record = self._read(draft_id)
            if int(record.get("revision", 0)) != base_revision:
                raise DraftConflict(str(record.get("name")), int(record.get("revision", 0)), base_revision)
            if not record.get("named") and str(state.doc.get("name") or "").strip():
                record["name"] = clean_name(str(state.doc["name"]))
            record.update(revision=base_revision + 1, saved_at=time.time(), doc=state.doc, history=state.history,
                          future=state.future)
            self._write(self._path(draft_id), record)
        return self._info(record)

    def rename(self, draft_id: str, name: str) -> DraftInfo:
        """Give a draft a new name; its revision stays (the document did not change)."""
        new = clean_name(name)
        with self._locked():
            record = self._read(draft_id)
            record["name"], record["named"] = new, True
            self._write(self._path(draft_id), record)
        return self._info(record)

    def duplicate(self, draft_id: str, name: str | None = None) -> DraftInfo:
        """A new draft with the saved content of ``draft_id`` (history included)."""
        info, state = self.load(draft_id)
        return self.create(name or f"{info.name} (copy)", state, named=True)

    def delete(self, draft_id: str) -> None:
        with self._locked():
            path = self._path(draft_id)
            if not path.exists():
                raise DraftError(f"No draft {draft_id!r} to delete (already deleted, perhaps from another tab).")
            path.unlink()

    # ------------------------------------------------------------------ the draft a new session opens

    def last_open(self) -> str | None:
        try:
            draft_id = (self.dir / _LAST_OPEN).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return draft_id if draft_id.isalnum() and self._path(draft_id).exists() else None

    def set_last_open(self, draft_id: str) -> None:
        with self._locked():
            path = self.dir / _LAST_OPEN
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".last-", suffix=".tmp")
            os.fchmod(fd, PRIVATE_FILE)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(draft_id)
            os.replace(tmp, path)
