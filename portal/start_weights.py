"""Starting weights (``training.init_weights``, e.g. an ONNX import's) made visible and kept safe.

The training layer says which file the pipeline starts from, its size and the nodes it covers. An edit
that changes a covered node's weights (a shape, a bias switched, the node deleted) makes the weights
misfit: the editor lists it as a problem (so it is never "Valid" and never submitted with them) and asks,
beside the problem, to drop those nodes' weights or all of them. Dropping writes a copy of the file
without those nodes (entries copied as they are, never loaded whole) next to the original and points
``training.init_weights`` at it; those nodes start from their own initialisers, the others from the file.
Undo brings the original back. The shapes are read from the file's array headers, cached per file
version, so a rerun does not read a large file again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import CommandError, FlowTrainError, Problem
from core.weights import Shapes, by_node, canonical_shapes, mismatch_problem, npz_shapes, weight_mismatches

if TYPE_CHECKING:
    from portal.editor_state import Editor

TOPIC = "init_weights"  # the notice of the last drop
MAX_NODES_NAMED = 12


@lru_cache(maxsize=32)
def _shapes(path: str, mtime_ns: int, size: int) -> Shapes:
    del mtime_ns, size  # the cache key: a rewritten file is read again
    return npz_shapes(path)


@dataclass(frozen=True)
class StartWeights:
    """What ``training.init_weights`` holds against the current graph."""

    path: str
    size: int = 0
    covered: list[str] = field(default_factory=list)  # nodes whose weights come from the file and fit
    misfits: dict[str, str] = field(default_factory=dict)  # node → why its weights do not fit
    error: str | None = None  # the file cannot be read

    def problems(self) -> list[Problem]:
        if self.error is not None:
            return [Problem("training.init_weights", self.error, received=repr(self.path)[:300],
                            fix="import the model again, or drop the starting weights")]
        return [mismatch_problem(self.misfits, self.path)] if self.misfits else []


def start_weights(ed: Editor) -> StartWeights | None:
    """The pipeline's starting weights, checked against its graph; ``None`` when it has none (or the
    graph cannot be analysed: its own problems come first)."""
    path = ed.doc["training"].get("init_weights")
    analysis = ed.analysis()
    if not path or analysis is None or not os.path.isabs(path):
        return None  # a relative path is a spec's, pinned (and refused if unreadable) when it is imported
    try:
        st = os.stat(path)
        found = _shapes(path, st.st_mtime_ns, st.st_size)
    except (OSError, CommandError) as err:
        return StartWeights(path, error=f"the starting weights cannot be read: {err}")
    misfits = weight_mismatches(canonical_shapes(analysis), found)
    covered = [n for n in by_node(found) if n not in misfits]
    return StartWeights(path, st.st_size, covered, misfits)


def problems(ed: Editor) -> list[Problem]:
    fit = start_weights(ed)
    return fit.problems() if fit is not None else []


def _names(nodes: list[str]) -> str:
    shown = ", ".join(nodes[:MAX_NODES_NAMED])
    return shown + (f" and {len(nodes) - MAX_NODES_NAMED} more" if len(nodes) > MAX_NODES_NAMED else "")


def describe(fit: StartWeights) -> str:
    """One line for the training layer: the file, its size, the nodes it covers."""
    if fit.error is not None:
        return f"Starts from the weights in {fit.path}, which {fit.error.removeprefix('the starting weights ')}."
    text = (f"Starts from imported weights: {fit.path} ({fit.size / 2**20:.1f} MB), covering {len(fit.covered)} "
            f"node(s): {_names(sorted(fit.covered))}.")
    if fit.misfits:
        text += f" They no longer fit {_names(sorted(fit.misfits))}: drop those nodes' weights (under the canvas)."
    return text


def copy_without(path: str, nodes: set[str]) -> str:
    """A copy of the weights file ``path`` without the weights of ``nodes``, next to it (the same folder,
    so inside the same data root), written atomically; its entries are copied as stored, never loaded."""
    src = Path(path)
    digest = hashlib.sha256("\n".join([src.name, *sorted(nodes)]).encode()).hexdigest()[:10]
    stem = src.name.removesuffix(".npz").removesuffix(".weights")
    target = src.with_name(f"{stem}-without-{digest}.weights.npz")
    if target.is_file() and not target.is_symlink():
        return str(target)
    tmp = src.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(src) as inp, \
                zipfile.ZipFile(raw, "w", allowZip64=True) as out:
            for info in inp.infolist():
                if info.filename.removesuffix(".npy").rpartition("/")[0] in nodes:
                    continue
                with inp.open(info) as r, out.open(info, "w", force_zip64=info.file_size > 2**31) as w:
                    shutil.copyfileobj(r, w, 2**22)
        os.replace(tmp, target)
    except (OSError, zipfile.BadZipFile) as err:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise FlowTrainError(f"could not write the weights without {_names(sorted(nodes))} next to {src}: "
                             f"{err}") from None
    return str(target)


def drop(ed: Editor, nodes: list[str] | None) -> None:
    """Drop the starting weights of ``nodes`` (``None``: all of them), saying what was dropped."""
    fit = start_weights(ed)
    if fit is None:
        return
    if nodes is None or not fit.covered or set(fit.covered) <= set(nodes):
        ed.set_field("training", ("init_weights",), None)
        ed.notice("info", f"Dropped the starting weights ({fit.path}): every node starts from its own initialiser. "
                          "Undo brings them back.", "graph", topic=TOPIC)
        return
    try:
        kept = copy_without(fit.path, set(nodes))
    except FlowTrainError as err:
        ed.notice("error", f"Could not drop the weights: {err}", "graph", topic=TOPIC)
        return
    ed.set_field("training", ("init_weights",), kept)
    ed.notice("info", f"Dropped the starting weights of {_names(sorted(nodes))} (they no longer fit): "
                      f"{'it starts' if len(nodes) == 1 else 'they start'} from {'its' if len(nodes) == 1 else 'their'} "
                      f"own initialiser; {len(fit.covered)} node(s) still start from the imported weights ({kept}). "
                      "Undo brings them back.", "graph", topic=TOPIC)


# --------------------------------------------------------------------------- drawing


def ask_to_drop(ed: Editor) -> None:
    """Under the canvas, beside the problem: the nodes whose weights no longer fit, and the two ways out."""
    import streamlit as st

    fit = start_weights(ed)
    if fit is None or not fit.misfits:
        return
    nodes = sorted(fit.misfits)
    st.warning(f"The imported starting weights of {_names(nodes)} no longer fit the graph "
               f"({'; '.join(f'{n}: {fit.misfits[n]}' for n in nodes[:3])}). Drop them, or undo the edit.",
               icon=":material/scale:")
    a, b, _ = st.columns([3, 3, 4])
    a.button(f"Drop the weights of {len(nodes)} node(s)", key="editor.weights.drop", on_click=drop, args=(ed, nodes),
             help=f"{_names(nodes)} start from their own initialisers; the other nodes keep the imported weights.")
    b.button("Drop all starting weights", key="editor.weights.drop_all", on_click=drop, args=(ed, None),
             help="Every node starts from its own initialiser.")


def status(ed: Editor) -> None:
    """The training layer's line about the starting weights (nothing when there are none)."""
    import streamlit as st

    fit = start_weights(ed)
    if fit is not None:
        (st.warning if fit.misfits or fit.error else st.info)(describe(fit), icon=":material/scale:")
