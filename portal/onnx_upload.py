"""The editor's "Import ONNX": an uploaded ONNX model becomes the pipeline, starting from its weights.

The upload never passes through Streamlit's uploader (which holds a whole upload in the portal's memory):
the browser sends it in pieces to the portal's upload route, which writes it to disk as it arrives
(:mod:`portal.upload_widget` in the page, :mod:`portal.upload_route` and :mod:`portal.upload_store` on the
server), into the folder the user chose for the weights, up to the site's limit (``[portal]
max_onnx_upload_mb``, default 2 GB). The complete file is then converted by
:func:`core.onnx_import.import_onnx` within the portal's folding budget (:data:`portal.limits.ONNX_FOLD`),
in a bounded subprocess that gets a copy made in pieces, one import per user and a few over all users at a
time (:data:`portal.limits.GATE`), and removed; external data is refused (an upload is one file, see
:mod:`core.onnx_import._load`). Its canonical weights are written into that folder inside the user's data
roots (default ``imported`` under the first root: a run may read only what lies under the user's roots),
said beside the upload before anything is written (``<folder>/<name>-<digest>.weights.npz``), and named by
the spec's ``training.init_weights``, so every framework's program starts from them. What cannot be
imported is shown as the project's problems (each naming the ONNX op type, node and opset), the pipeline
left as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import streamlit as st

from core.errors import FlowTrainError, SpecError
from portal import limits, upload_store, upload_widget
from portal.editor_state import Editor
from portal.param_text import md_text
from settings import Settings
from settings.access import AccessError, confine, data_roots, pin_source

TOPIC = "document"  # replaces the notice of the last template or import (portal.editor_view.DOCUMENT_TOPIC)
MAX_PROBLEMS_SHOWN = 25


def _problems_text(err: SpecError) -> str:
    """The problems as a Markdown list; each one's text literal (it quotes the model's op types and
    node names, which the model's author chose)."""
    lines = [f"- {md_text(str(p))}" for p in err.problems[:MAX_PROBLEMS_SHOWN]]
    if len(err.problems) > MAX_PROBLEMS_SHOWN:
        lines.append(f"- … and {len(err.problems) - MAX_PROBLEMS_SHOWN} more")
    return f"{len(err.problems)} problem(s):\n\n" + "\n".join(lines)


DEFAULT_FOLDER = "imported"  # under the user's first data root


def default_folder(user: str, settings: Settings) -> str:
    roots = data_roots(user, settings)
    return str(roots[0] / DEFAULT_FOLDER) if roots else ""


def weights_name(stem: str, digest: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:80] or "model"
    return f"{safe}-{digest[:12]}.weights.npz"


def weights_folder(user: str, folder: str, settings: Settings) -> Path:
    """The folder the user chose for the weights, resolved inside their data roots (a relative one is under
    the first root), or a :class:`FlowTrainError` that says where it may be."""
    try:
        return confine(user, folder.strip() or DEFAULT_FOLDER, settings)
    except AccessError as err:
        raise FlowTrainError(f"the weights folder is refused: {str(err).replace('data path', 'folder')}") from None


def _save_weights(source: BinaryIO, folder: Path, stem: str, digest: str) -> Path:
    """``<folder>/<stem>-<digest>.weights.npz``, copied in pieces from ``source`` (the import's ``.npz``) and
    written atomically (a run may read it at once).

    ``folder`` (inside the user's roots) must be a real folder, not a symbolic link (a user could point one
    at a folder of the portal's): it is opened with ``O_NOFOLLOW`` and the file is created and renamed
    relative to that open folder, so nothing is written anywhere else, even if the folder is swapped for a
    link meanwhile.
    """
    with contextlib.suppress(FileExistsError):
        folder.mkdir(parents=True)
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise FlowTrainError(f"{folder} is not a plain folder (a symbolic link, or not a folder), so the imported "
                             "weights are not written there; remove it or make it a real folder") from None
    target = weights_name(stem, digest)
    tmp = f".{target}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                shutil.copyfileobj(source, f, 2**20)
            os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)
    return folder / target


def _digest(raw: bytes | BinaryIO) -> str:
    if isinstance(raw, bytes):
        return hashlib.sha256(raw).hexdigest()
    h = hashlib.sha256()
    for piece in iter(lambda: raw.read(2**20), b""):
        h.update(piece)
    raw.seek(0)
    return h.hexdigest()


def import_onnx_upload(ed: Editor, name: str, size: int, read: Callable[[], bytes | BinaryIO], settings: Settings,
                       user: str, folder: str | None = None) -> bool:
    """Import an uploaded ONNX model (its bytes, or an open file read in pieces) into the editor, its weights
    into ``folder`` (default :func:`default_folder`), or leave a notice saying why not."""
    from core.onnx_import.bounded import import_bounded  # imported when a model is uploaded, not with the page

    limit_mb = settings.max_onnx_upload_mb
    if size > limit_mb * 2**20:
        ed.notice("error", f"Could not import {md_text(name)}: it is {size / 2**20:,.1f} MB; this portal imports ONNX "
                           f"models of at most {limit_mb:,} MB (import larger models with `python -m flowtrain "
                           "import-onnx`).", "toolbar", topic=TOPIC)
        return False
    stem = Path(name).stem
    try:
        if not data_roots(user, settings):
            raise FlowTrainError("no data roots are configured for you, so the weights have nowhere to go; "
                                 "add [data] roots to the settings file")
        target = weights_folder(user, folder if folder is not None else default_folder(user, settings), settings)
        raw = read()
        with limits.GATE.hold("onnx_import", user):
            memory, timeout = limits.onnx_import_bounds(size)  # the model, its arrays and the spec
            digest = _digest(raw)
            saved: list[Path] = []
            result = import_bounded(raw, stem, limits.ONNX_FOLD, memory, timeout,
                                    keep_weights=lambda npz: saved.append(_save_weights(npz, target, stem, digest)))
            [weights] = saved
        training = result.spec.training.model_copy(update={"init_weights": str(weights)})
        spec = pin_source(result.spec.model_copy(update={"training": training}), user, settings)
    except SpecError as err:
        ed.notice("error", f"Could not import {md_text(name)}: {_problems_text(err)}", "toolbar", topic=TOPIC)
        return False
    except FlowTrainError as err:
        ed.notice("error", f"Could not import {md_text(name)}: {md_text(str(err))}", "toolbar", topic=TOPIC)
        return False
    ed.load_spec(spec)
    notes = "".join(f" Note: {md_text(n)}." for n in result.notes)
    ed.notice("success", f"Imported {md_text(name)}: {len(spec.model.nodes)} nodes, starting from its weights, "
                         f"written to {md_text(str(weights))} ({weights.stat().st_size / 2**20:,.1f} MB).{notes}",
              "toolbar", topic=TOPIC)
    return True


# --------------------------------------------------------------------------- drawing

FOLDER_KEY = "toolbar.onnx.folder"


def import_ticket(ed: Editor, token: str, settings: Settings, user: str) -> bool:
    """Import the complete upload of ``token`` (:mod:`portal.upload_store`), its weights into the folder it
    landed in, then remove the uploaded file (the weights it gave stay)."""
    try:
        ticket = upload_store.take(token, user)
    except upload_store.UploadError as err:
        ed.notice("error", f"Could not import the upload: {md_text(str(err))}", "toolbar", topic=TOPIC)
        return False
    try:
        with upload_store.open_complete(ticket) as f:
            return import_onnx_upload(ed, ticket.name, ticket.total, lambda: f, settings, user, str(ticket.folder))
    except upload_store.UploadError as err:
        ed.notice("error", f"Could not import {md_text(ticket.name)}: {md_text(str(err))}", "toolbar", topic=TOPIC)
        return False
    finally:
        upload_store.end(ticket)  # the upload itself is not kept; its weights are


def _import(ed: Editor, settings: Settings, user: str) -> None:
    """The uploader's callback, once the browser has sent the whole file."""
    from portal.session import reset_widgets

    token = upload_widget.uploaded_token()
    if token is not None and import_ticket(ed, token, settings, user):
        reset_widgets("editor.")  # the editor's state about the old document (editor_view._after_replace)
        reset_widgets("toolbar.template")  # the picker shows no template once the pipeline is an import


def _root_of(folder: Path, user: str, settings: Settings) -> Path | None:
    return next((r for r in data_roots(user, settings) if folder.is_relative_to(r)), None)


def import_form(ed: Editor, settings: Settings, user: str) -> None:
    """The ONNX uploader, with the folder its weights go to said (and chosen) before anything is written."""
    default = default_folder(user, settings)
    if FOLDER_KEY not in st.session_state:
        st.session_state[FOLDER_KEY] = default
    limit_mb = settings.max_onnx_upload_mb
    up, where = st.columns([3, 2], vertical_alignment="top")
    held = None
    with where:
        st.text_input("Save its weights in (a folder under your data roots)", key=FOLDER_KEY,
                      help=f"Default: {default or '(no data roots configured)'}. A relative folder is under your first "
                           "data root; it is created if missing.")
        try:
            folder = weights_folder(user, st.session_state.get(FOLDER_KEY) or "", settings)
            root = _root_of(folder, user, settings)
            if root is not None:
                held = upload_widget.ticket(user, root, folder, limit_mb * 2**20)
            st.caption(f"The upload lands in {md_text(str(folder))} while it is imported (then it is removed); the "
                       f"weights are written there as <model>-<digest>.weights.npz, and the pipeline starts from them.")
        except FlowTrainError as err:
            st.error(md_text(str(err)))
    with up:
        upload_widget.uploader(f"Import ONNX (a published model and its weights, up to {limit_mb:,} MB)", held,
                               lambda: _import(ed, settings, user))
