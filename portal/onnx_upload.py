"""The editor's "Import ONNX": an uploaded ONNX model becomes the pipeline, starting from its weights.

The upload is size-limited like a spec import (:data:`portal.limits.MAX_ONNX_UPLOAD_MB`, checked before
it is read) and converted by :func:`core.onnx_import.import_onnx` within the portal's folding budget
(:data:`portal.limits.ONNX_FOLD`), one import per user and a few over all users at a time
(:data:`portal.limits.GATE`); external data is refused (an upload is one file, see
:mod:`core.onnx_import._load`). Its canonical weights are written
under the user's first data root (``imported/<name>-<digest>.weights.npz``: a run may read only what
lies under the user's roots) and named by the spec's ``training.init_weights``, so every framework's
program starts from them. What cannot be imported is shown as the project's problems (each naming the
ONNX op type, node and opset), the pipeline left as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import numpy as np

from core.errors import FlowTrainError, SpecError
from portal import limits
from portal.editor_state import Editor
from portal.param_text import md_text
from settings import Settings
from settings.access import data_roots, pin_source

TOPIC = "document"  # replaces the notice of the last template or import (portal.editor_view.DOCUMENT_TOPIC)
MAX_PROBLEMS_SHOWN = 25


def _problems_text(err: SpecError) -> str:
    """The problems as a Markdown list; each one's text literal (it quotes the model's op types and
    node names, which the model's author chose)."""
    lines = [f"- {md_text(str(p))}" for p in err.problems[:MAX_PROBLEMS_SHOWN]]
    if len(err.problems) > MAX_PROBLEMS_SHOWN:
        lines.append(f"- … and {len(err.problems) - MAX_PROBLEMS_SHOWN} more")
    return f"{len(err.problems)} problem(s):\n\n" + "\n".join(lines)


def _save_weights(weights: dict[str, np.ndarray], root: Path, stem: str, digest: str) -> Path:
    """``<root>/imported/<stem>-<digest>.weights.npz``, written atomically (a run may read it at once).

    ``imported`` must be a real folder of the root, not a symbolic link (a user could point one at a folder
    of the portal's): it is opened with ``O_NOFOLLOW`` and the file is created and renamed relative to that
    open folder, so nothing is written anywhere else, even if the folder is swapped for a link meanwhile.
    """
    folder = root / "imported"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(parents=True)
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise FlowTrainError(f"{folder} is not a plain folder (a symbolic link, or not a folder), so the imported "
                             "weights are not written there; remove it or make it a real folder") from None
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:80] or "model"
    target = f"{safe}-{digest[:12]}.weights.npz"
    tmp = f".{target}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **weights)
            os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)
    return folder / target


def import_onnx_upload(ed: Editor, name: str, size: int, read: Callable[[], bytes], settings: Settings,
                       user: str) -> bool:
    """Import an uploaded ONNX model into the editor, or leave a notice saying why not."""
    from core.onnx_import.bounded import import_bounded  # imported when a model is uploaded, not with the page

    if size > limits.MAX_ONNX_UPLOAD_BYTES:
        ed.notice("error", f"Could not import {md_text(name)}: it is {size / 2**20:.1f} MB; an ONNX upload may have at most "
                           f"{limits.MAX_ONNX_UPLOAD_MB} MB (import larger models with `python -m flowtrain "
                           "import-onnx`).", "toolbar", topic=TOPIC)
        return False
    stem = Path(name).stem
    try:
        roots = data_roots(user, settings)
        if not roots:
            raise FlowTrainError("no data roots are configured for you, so the weights have nowhere to go; "
                                 "add [data] roots to the settings file")
        raw = read()
        with limits.GATE.hold("onnx_import", user):
            result = import_bounded(raw, stem, limits.ONNX_FOLD, limits.ONNX_IMPORT_MEMORY_BYTES,
                                    limits.ONNX_IMPORT_TIMEOUT_S)
            weights = _save_weights(result.weights, roots[0], stem, hashlib.sha256(raw).hexdigest())
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
    ed.notice("success", f"Imported {md_text(name)}: {len(spec.model.nodes)} nodes, starting from its weights "
                         f"({md_text(str(weights))}).{notes}", "toolbar", topic=TOPIC)
    return True
