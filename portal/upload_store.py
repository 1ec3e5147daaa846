"""Large uploads written to disk in pieces, never whole in the portal's memory (an ONNX model with its weights).

Streamlit's own uploader reads a whole upload into the portal's memory, so the editor's "Import ONNX" sends
its file through the portal's upload route instead (:mod:`portal.upload_route`): the page asks for a
:class:`Ticket` (a random token bound to the signed-in user, the folder the upload lands in and the site's
limit), and the browser sends the file in pieces of at most :data:`PIECE_BYTES`, each one appended at its
offset. Nothing here uses Streamlit or the web server, so the rules are tested directly:

- the file lands in the folder the user chose under their data roots (their own disk space, said before
  writing), as a hidden ``.flowtrain-upload-<token>.part``; every folder below the data root is opened
  with ``O_NOFOLLOW`` one at a time and the file is created relative to the last one with ``O_EXCL |
  O_NOFOLLOW``, so a symbolic link anywhere below the root cannot send a byte elsewhere;
- the site's limit (``[portal] max_onnx_upload_mb``) is checked against the announced size before the
  first byte and against the bytes actually written at every piece;
- a file that does not start like an ONNX model (a protobuf ``ModelProto``: field 1, ``ir_version``) or
  whose name does not end in ``.onnx`` is refused at its first piece;
- the partial file is removed on any refusal or error and on cancel (the ticket may then send another
  file), and once the upload is left unfinished for :data:`TICKET_TTL_S`
  (:data:`TICKET_TTL_S`: swept whenever a ticket is issued or a piece arrives, and left-over ``.part``
  files of a restarted portal when a ticket for their folder is issued).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

PIECE_BYTES = 8 * 2**20  # what the browser sends per request; the route refuses a larger piece
TICKET_TTL_S = 3600.0  # an upload not finished within this after its last piece is removed
IDLE_TICKET_TTL_S = 7 * 24 * 3600.0  # a ticket never used (an editor left open) is forgotten after this
PREFIX = ".flowtrain-upload-"
ONNX_FIRST_BYTE = 0x08  # ModelProto field 1 (ir_version), a varint: the first byte of every saved ONNX model


class UploadError(Exception):
    """An upload refused or stopped; ``status`` is the HTTP status the route answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Ticket:
    token: str
    user: str
    root: Path  # the data root the folder is under (the administrator's; trusted)
    folder: Path  # where the upload lands, inside ``root``
    limit_bytes: int
    name: str = ""
    total: int = 0
    received: int = 0
    complete: bool = False
    touched: float = field(default_factory=time.monotonic)
    busy: threading.Lock = field(default_factory=threading.Lock)  # one piece at a time

    @property
    def part_name(self) -> str:
        return f"{PREFIX}{self.token}.part"

    @property
    def path(self) -> Path:
        return self.folder / self.part_name


_TICKETS: dict[str, Ticket] = {}
_LOCK = threading.Lock()


def open_folder(root: Path, folder: Path, create: bool = True) -> int:
    """A descriptor of ``folder`` (inside ``root``), each folder below ``root`` opened with ``O_NOFOLLOW``
    (created 0700 where missing): a symbolic link on the way is refused, never followed."""
    parts = folder.relative_to(root).parts
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                raise UploadError(f"{root.joinpath(*parts[:parts.index(part) + 1])} is a symbolic link or not a "
                                  "folder, so nothing is written there; make it a real folder or choose another",
                                  403) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def issue(user: str, root: Path, folder: Path, limit_bytes: int) -> Ticket:
    """A new ticket for one upload by ``user`` into ``folder`` (which must be inside ``root``)."""
    folder.relative_to(root)  # a ValueError is a bug of the caller, not user input
    sweep()
    _remove_leftovers(root, folder)
    ticket = Ticket(secrets.token_urlsafe(24), user, root, folder, limit_bytes)
    with _LOCK:
        _TICKETS[ticket.token] = ticket
    return ticket


def find(token: str) -> Ticket:
    with _LOCK:
        ticket = _TICKETS.get(token)
    if ticket is None:
        raise UploadError("this upload is not known to the portal (it expired, was cancelled or the portal "
                          "restarted); reload the page and upload again", 404)
    return ticket


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def write_piece(ticket: Ticket, offset: int, pieces: Iterable[bytes], name: str = "", total: int = 0) -> int:
    """Append the bytes of ``pieces`` at ``offset`` (the bytes received so far); returns the bytes received.

    The first piece (``offset`` 0) names the file and its ``total`` size: checked against the type and the
    limit before anything is written. On any refusal or error the partial file is removed and the ticket
    starts over (the page may send another file with it).
    """
    sweep()
    if not ticket.busy.acquire(blocking=False):
        raise UploadError("another piece of this upload is being written; send one piece at a time", 409)
    try:
        if ticket.complete:
            raise UploadError("this upload is already complete", 409)
        if offset == 0 and ticket.received:
            reset(ticket)  # the page starts another file with this ticket
        try:
            if offset != ticket.received:
                raise UploadError(f"a piece at byte {offset:,} arrived, but {ticket.received:,} bytes are "
                                  "stored; upload the file again", 409)
            if offset == 0:
                _start(ticket, name, total)
            ticket.received = _append(ticket, pieces)
        except BaseException:
            reset(ticket)
            raise
        ticket.touched = time.monotonic()
        ticket.complete = ticket.received == ticket.total
        return ticket.received
    finally:
        ticket.busy.release()


def _start(ticket: Ticket, name: str, total: int) -> None:
    if not name.lower().endswith(".onnx"):
        raise UploadError(f"{name[:200]!r} is not an ONNX model: choose a file ending in .onnx", 415)
    if total <= 0:
        raise UploadError(f"{name[:200]!r} is empty; choose an ONNX model file", 400)
    if total > ticket.limit_bytes:
        raise UploadError(f"{name[:200]!r} is {_mb(total)}; this portal imports ONNX models of at most "
                          f"{_mb(ticket.limit_bytes)} (the administrator's [portal] max_onnx_upload_mb); import "
                          "larger models with `python -m flowtrain import-onnx`", 413)
    ticket.name, ticket.total = name, total
    dir_fd = open_folder(ticket.root, ticket.folder)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ticket.part_name, dir_fd=dir_fd)  # a piece written after a cancel left it
        fd = os.open(ticket.part_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    os.close(fd)


def _append(ticket: Ticket, pieces: Iterable[bytes]) -> int:
    dir_fd = open_folder(ticket.root, ticket.folder, create=False)
    try:
        fd = os.open(ticket.part_name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        raise UploadError("the partial upload is gone from its folder; upload the file again", 409) from None
    finally:
        os.close(dir_fd)
    received = ticket.received
    try:
        for piece in pieces:
            if received == 0 and piece and piece[0] != ONNX_FIRST_BYTE:
                raise UploadError(f"{ticket.name[:200]!r} is not an ONNX model (it does not start like one); "
                                  "choose the model's .onnx file", 415)
            received += len(piece)
            if received > ticket.total:
                raise UploadError(f"{ticket.name[:200]!r} sent more than the {ticket.total:,} bytes it announced",
                                  413)
            os.write(fd, piece)  # a short write raises (regular file), never silently truncates
        if received == ticket.total:
            os.fsync(fd)
    finally:
        os.close(fd)
    return received


def reset(ticket: Ticket) -> None:
    """Remove the ticket's partial file; the ticket may start another upload (a cancel, a refused file)."""
    _unlink(ticket)
    ticket.name, ticket.total, ticket.received, ticket.complete = "", 0, 0, False
    ticket.touched = time.monotonic()


def end(ticket: Ticket) -> None:
    """End the ticket and remove its file (imported, or abandoned)."""
    with _LOCK:
        _TICKETS.pop(ticket.token, None)
    _unlink(ticket)


def take(token: str, user: str) -> Ticket:
    """The complete upload of ``token`` for ``user``, its ticket ended (the caller removes the file with
    :func:`end` after importing it)."""
    ticket = find(token)
    if ticket.user != user:
        raise UploadError("this upload belongs to another user", 403)
    if not ticket.complete:
        raise UploadError(f"the upload of {ticket.name!r} is not complete ({ticket.received:,} of "
                          f"{ticket.total:,} bytes); upload it again", 409)
    with _LOCK:
        _TICKETS.pop(token, None)
    return ticket


def _unlink(ticket: Ticket) -> None:
    try:
        dir_fd = open_folder(ticket.root, ticket.folder, create=False)
    except (OSError, UploadError):
        return  # the folder is gone or was replaced by a link: nothing of ours is reachable there
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ticket.part_name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def sweep(now: float | None = None) -> None:
    """Remove the files of uploads not touched within :data:`TICKET_TTL_S` (a closed tab mid-upload) and
    forget their tickets; a ticket that holds nothing yet lasts :data:`IDLE_TICKET_TTL_S` (an editor left
    open overnight still uploads)."""
    now = time.monotonic() if now is None else now
    with _LOCK:
        stale = [t for t in _TICKETS.values()
                 if now - t.touched > (TICKET_TTL_S if t.received or t.complete else IDLE_TICKET_TTL_S)]
        for t in stale:
            del _TICKETS[t.token]
    for t in stale:
        _unlink(t)


def _remove_leftovers(root: Path, folder: Path) -> None:
    """Partial files in ``folder`` that no ticket owns and that are older than the TTL (a portal restart)."""
    try:
        dir_fd = open_folder(root, folder, create=False)
    except (OSError, UploadError):
        return
    try:
        with _LOCK:
            owned = {t.part_name for t in _TICKETS.values()}
        for entry in os.listdir(dir_fd):
            if not entry.startswith(PREFIX) or not entry.endswith(".part") or entry in owned:
                continue
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                if time.time() - st.st_mtime > TICKET_TTL_S:
                    os.unlink(entry, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def open_complete(ticket: Ticket) -> BinaryIO:
    """The complete upload, opened for reading through its folder's ``O_NOFOLLOW`` descriptors."""
    dir_fd = open_folder(ticket.root, ticket.folder, create=False)
    try:
        fd = os.open(ticket.part_name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        raise UploadError("the uploaded file is gone from its folder; upload it again", 409) from None
    finally:
        os.close(dir_fd)
    return os.fdopen(fd, "rb")
