"""Everything a run reads, pinned for its user before anything is generated: the one entry for
submission (a run, a sweep and each of its points, calibration jobs).

:func:`settings.access.pin_source` resolves ``data.source`` and ``training.init_weights`` inside the
user's data roots. On top of it, here: the members of a folder source (class folders, images,
shards) that are symbolic links leading outside the user's roots are refused
(:mod:`core.data_members`), and every sweep point is pinned like a run, since a sweep may set any
``training.*`` path, ``init_weights`` included (:func:`pin_points`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.data_members import describe, inside, links_leaving
from core.errors import Problem, SpecError
from core.segmentation_data import mask_problems
from core.spec import PipelineSpec
from core.sweep import SweepPlan
from settings import Settings
from settings.access import data_roots, pin_source

INIT_WEIGHTS = "training.init_weights"


def pin_run(spec: PipelineSpec, user: str, settings: Settings, spec_dir: Path | None = None) -> PipelineSpec:
    """``spec`` pinned for ``user`` (:func:`settings.access.pin_source`), its folder source's members
    checked; :class:`SpecError` with every problem otherwise."""
    pinned = pin_source(spec, user, settings, spec_dir)
    source = pinned.data.source
    if source.startswith("sklearn:"):
        return pinned
    if Path(source).is_dir():
        _refuse_links_leaving(Path(source), user, settings)
    if pinned.data.task == "segmentation":  # the masks read once here, after the links: a bad one named
        masks = mask_problems(pinned.data, Path(source))
        if masks:
            raise SpecError(masks)
    return pinned


def _refuse_links_leaving(source: Path, user: str, settings: Settings) -> None:
    roots = data_roots(user, settings)
    leaving = links_leaving(source, inside(roots))
    if leaving:
        raise SpecError([Problem(
            "data.source", f"{len(leaving):,} member(s) of the folder are symbolic links that lead outside your "
            f"data roots: {describe(leaving)}; a run reads only data inside your roots", received=str(source),
            expected=f"files and folders inside your data roots ({', '.join(str(r) for r in roots)})",
            fix="remove those links, or copy the files they point at into the folder")])


def pin_points(plan: SweepPlan, user: str, settings: Settings, spec_dir: Path | None = None) -> SweepPlan:
    """Every point of ``plan`` pinned like a run (a point may set ``training.init_weights``); a
    :class:`SpecError` with every refused path of every point, naming the point, otherwise."""
    points = []
    problems: list[Problem] = []
    for point in plan.points:  # one point's spec at a time: a point keeps only its values
        try:
            pinned = pin_source(plan.variant_spec(point), user, settings, spec_dir)
        except SpecError as err:
            problems += [replace(p, message=f"{p.message} (sweep point {point.index}: {point.words()})")
                         for p in err.problems]
            continue
        values = dict(point.values)
        if INIT_WEIGHTS in values:  # the only path a point may set (data.source is not sweepable)
            values[INIT_WEIGHTS] = pinned.training.init_weights
        points.append(replace(point, values=values))
    if problems:
        raise SpecError(problems)
    return replace(plan, points=points)
