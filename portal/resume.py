"""Resuming a stopped run from its last checkpoint, as a new run.

The generated program resumes from the newest complete checkpoint in *its own* folder
(``checkpoints/ckpt-<step><suffix>``, docs/generated-program.md), and a resubmitted run gets a new
folder: by itself it starts again from epoch 1. So a resume copies the stopped run's last checkpoint
into the new run's folder after the program is written there and before the job is submitted
(:func:`seed`, the ``before_submit`` step of :func:`schedulers.launch.launch`). The program accepts it only when it was written for the same spec (its hash) and
framework: a resume uses both of the stopped run.

Which files make a checkpoint, and which one marks it complete, is read from the run's own program
(``CHECKPOINT_FILES`` in ``train.py``, or ``devices.py`` where the keras program keeps its checkpoint
format), so this module repeats no template's fact.
"""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKPOINTS = "checkpoints"
RESUMED_FROM = "resumed_from.json"  # in a resumed run's folder: the run and step it went on from


@dataclass(frozen=True)
class Checkpoint:
    step: int
    files: tuple[Path, ...]  # in the order the program writes them; the last marks it complete


PROGRAM_FILES = ("train.py", "devices.py")  # where a generated program may declare CHECKPOINT_FILES


def checkpoint_suffixes(program_dir: Path) -> tuple[str, ...] | None:
    """``CHECKPOINT_FILES`` of the generated program in ``program_dir`` (e.g. ``(".pt",)``), or None when
    none of its :data:`PROGRAM_FILES` declares them."""
    for name in PROGRAM_FILES:
        found = _declared_suffixes(program_dir / name)
        if found is not None:
            return found
    return None


def _declared_suffixes(module: Path) -> tuple[str, ...] | None:
    try:
        tree = ast.parse(module.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CHECKPOINT_FILES"
                                                for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            if isinstance(value, tuple) and value and all(isinstance(s, str) and s.startswith(".") for s in value):
                return value
    return None


def last_checkpoint(run_dir: Path) -> Checkpoint | None:
    """The newest complete checkpoint of a run (its files all present), or None."""
    suffixes = checkpoint_suffixes(run_dir)
    folder = run_dir / CHECKPOINTS
    if suffixes is None or not folder.is_dir():
        return None
    marker = suffixes[-1]
    steps = []
    for path in folder.glob(f"ckpt-*{marker}"):  # as the program finds them (checkpoint_paths)
        step = path.name.removeprefix("ckpt-").removesuffix(marker)
        if step.isdigit():
            steps.append(int(step))
    for step in sorted(steps, reverse=True):
        files = tuple(folder / f"ckpt-{step}{s}" for s in suffixes)
        if all(f.is_file() for f in files):
            return Checkpoint(step, files)
    return None


def seed(run_dir: Path, checkpoint: Checkpoint, parent: str | None = None) -> None:
    """Copy the checkpoint into ``run_dir/checkpoints``, the marker file last (as the program writes it),
    and note which run (``parent``) it came from in ``run_dir/resumed_from.json``."""
    target = run_dir / CHECKPOINTS
    target.mkdir(parents=True, exist_ok=True)
    for f in checkpoint.files:
        shutil.copy2(f, target / f.name)
    if parent is not None:
        (run_dir / RESUMED_FROM).write_text(json.dumps({"run": parent, "step": checkpoint.step}), encoding="utf-8")


def resumed_from(run_dir: Path) -> tuple[str, int] | None:
    """(parent run id, step) of a run resumed from another one's checkpoint; None for any other run."""
    try:
        doc = json.loads((Path(run_dir) / RESUMED_FROM).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("run"), str) or not isinstance(doc.get("step"), int):
        return None
    return doc["run"], doc["step"]


def lineage(run: Any, runs: Sequence[Any]) -> str:
    """The run's parent (the run it resumed) and children (the runs that resumed it), in words; "" when none."""
    parts = []
    parent = resumed_from(run.run_dir)
    if parent is not None:
        parts.append(f"Resumed from run {parent[0]} at step {parent[1]:,}")
    children = [r.id for r in runs if r.id != run.id and (resumed_from(r.run_dir) or ("",))[0] == run.id]
    if children:
        parts.append(("resumed" if parts else "Resumed") + f" as run {', '.join(children)}")
    return "; ".join(parts) + ("." if parts else "")
