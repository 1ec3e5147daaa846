"""Sweeps: one pipeline spec, many variants of it, each a run; expanded and validated here.

A sweep is its own small document (``python -m flowtrain sweep SPEC --sweep SWEEP.json``), given
beside the spec rather than inside it: a spec stays one run's complete description (its hash, the
``spec.json`` each generated program carries and the editor's round trip do not change), and the
spec's schema version is not touched by adding sweeps. Example::

    {"method": "grid",
     "parameters": {"training.optimizer.lr": [0.001, 0.01], "nodes.dropout1.p": [0.1, 0.3, 0.5]},
     "max_points": 6, "parallelism": 2, "metric": {"name": "val_accuracy", "goal": "max"}}

A swept path is ``data.<field>``, ``training.<field>[.<field>]`` (a setting of the spec) or
``nodes.<node id>.<param>`` (a parameter of one layer). ``grid`` takes every combination of the
listed values (at most ``max_points`` of them, else an error: never a silent cut); ``random`` draws
``samples`` points (seeded, reproducible) from lists or ranges (``{"min", "max", "scale": "log"}``).

:func:`expand_sweep` checks everything up front and reports every problem at once: a bad path names
the path and lists the valid ones, and every variant is validated as a full spec (structure, shapes).
Paths that would split one job array (resources, framework) or change what data a run may read
(``data.source``, ``data.format``) cannot be swept.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, ValidationError

from core.errors import CommandError, Problem, SpecError
from core.load import problems_from_pydantic, spec_from_dict
from core.ops import REGISTRY
from core.spec import DataSpec, PipelineSpec, Strict, TrainingSpec
from core.validate import Analysis, analyse

SWEEP_VERSION = 1
MAX_SWEEP_POINTS = 1000
MAX_SWEEP_BYTES = 1024 * 1024
# Not sweepable: one job array has one set of resources and one framework/environment, and the data a
# run may read is pinned per user before anything is generated.
FIXED_PATHS = ("training.resources", "training.framework", "training.restarts", "data.source", "data.format")
FIXED_WHY = ("all points of a sweep run as one job array (one job script), with one framework, one set of "
             "resources, one restart budget and one data source")

Scalar = bool | int | float | str
SweepPath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,200}$")]


class Range(Strict):
    """A continuous range for ``random``: uniform, or log-uniform (``scale: log``); ``integer`` rounds."""

    min: float
    max: float
    scale: Literal["linear", "log"] = "linear"
    integer: bool = False


class SweepMetric(Strict):
    """What ranks the points: a key of ``result.json`` (``val_accuracy``, ``val_loss``, ``test_*`` …)."""

    name: Annotated[str, StringConstraints(pattern=r"^(val|test)_[A-Za-z_]{1,40}$")] = "val_accuracy"
    goal: Literal["max", "min"] = "max"


class SweepSpec(Strict):
    sweep_version: Literal[1] = SWEEP_VERSION
    method: Literal["grid", "random"] = "grid"
    parameters: dict[SweepPath, list[Scalar] | Range] = Field(min_length=1, max_length=32)
    max_points: Annotated[int, Field(ge=1, le=MAX_SWEEP_POINTS)] = 100
    samples: Annotated[int, Field(ge=1, le=MAX_SWEEP_POINTS)] | None = None
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    parallelism: Annotated[int, Field(ge=1, le=MAX_SWEEP_POINTS)] = 4
    metric: SweepMetric = Field(default_factory=SweepMetric)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2)


@dataclass(frozen=True)
class SweepPoint:
    """One variant: its index (the job array's task id) and the swept values. Its spec and analysis
    are made again when needed (:meth:`SweepPlan.variant`), not kept: a large pipeline's are
    hundreds of kilobytes each, and a sweep may have a thousand points."""

    index: int
    values: dict[str, Any]

    def words(self) -> str:
        return ", ".join(f"{k}={_show(v)}" for k, v in self.values.items())


@dataclass(frozen=True)
class SweepPlan:
    sweep: SweepSpec
    spec: PipelineSpec
    points: list[SweepPoint]

    @property
    def parallelism(self) -> int:
        return min(self.sweep.parallelism, len(self.points))

    def variant_spec(self, point: SweepPoint) -> PipelineSpec:
        """The point's spec alone (the analysis is the costly part)."""
        return spec_from_dict(variant_doc(self.spec, point.values))

    def variant(self, point: SweepPoint) -> tuple[PipelineSpec, Analysis]:
        """The point's spec and its analysis (every point was validated by :func:`expand_sweep`)."""
        spec = self.variant_spec(point)
        analysis = analyse(spec)
        if analysis.problems:  # the same spec passed in expand_sweep: only a changed op registry gets here
            raise SpecError(analysis.problems)
        return spec, analysis

    def variants(self) -> Iterator[tuple[SweepPoint, PipelineSpec, Analysis]]:
        """Each point with its spec and analysis, one at a time."""
        for point in self.points:
            yield (point, *self.variant(point))


# --------------------------------------------------------------------------- reading


def sweep_from_dict(doc: Any, source: str = "sweep") -> SweepSpec:
    if not isinstance(doc, dict):
        raise SpecError([Problem(source, "a sweep must be a JSON object", received=type(doc).__name__,
                                 expected='an object like {"method": "grid", "parameters": {...}}')])
    try:
        return SweepSpec.model_validate(doc)
    except ValidationError as exc:
        problems = problems_from_pydantic(exc, doc)
        raise SpecError([Problem(f"{source}.{p.location}", p.message, received=p.received, expected=p.expected,
                                 fix=p.fix) for p in problems]) from None


def load_sweep(path: str | Path) -> SweepSpec:
    p = Path(path)
    try:
        with p.open("rb") as fh:  # at most one byte past the limit: a FIFO or /dev/zero has no size
            data = fh.read(MAX_SWEEP_BYTES + 1)
    except FileNotFoundError:
        raise CommandError(f"{p}: no such file; pass the path of a sweep (JSON), see docs/sweeps.md") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise CommandError(f"{p}: {exc.strerror}") from None
    if len(data) > MAX_SWEEP_BYTES:
        raise CommandError(f"{p}: larger than {MAX_SWEEP_BYTES:,} bytes; a sweep lists paths and values")

    def refuse(text: str) -> float:
        raise ValueError(f"{text} is not a finite number")

    try:
        doc = json.loads(data, parse_constant=refuse)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(str(p), "is not valid JSON", received=str(exc), expected="a sweep as a JSON object",
                                 fix="check the brackets, quotes and commas; JSON has no Infinity or NaN")]) from None
    return sweep_from_dict(doc, source="sweep")


# --------------------------------------------------------------------------- paths


def _model_class(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _leaves(model: type[BaseModel], prefix: str) -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}.{name}"
        if path in FIXED_PATHS:
            continue
        sub = _model_class(info.annotation)
        out.extend(_leaves(sub, path) if sub is not None else [path])
    return out


SETTING_PATHS: tuple[str, ...] = (*_leaves(DataSpec, "data"), *_leaves(TrainingSpec, "training"))


def sweepable_paths(spec: PipelineSpec) -> list[str]:
    """Every path a sweep of ``spec`` may name (settings, then each node's parameters)."""
    nodes = [f"nodes.{n.id}.{prm.name}" for n in spec.model.nodes if n.op in REGISTRY
             for prm in REGISTRY.get(n.op).params]
    return [*SETTING_PATHS, *nodes]


def _path_problem(path: str, spec: PipelineSpec) -> Problem | None:
    """``None`` when ``path`` names something a sweep may change, else a problem listing the valid ones."""
    loc = f"sweep.parameters.{path}"
    if any(path == fixed or path.startswith(fixed + ".") for fixed in FIXED_PATHS):
        return Problem(loc, "cannot be swept", expected="a data or training setting or a node parameter",
                       fix=FIXED_WHY + "; run separate sweeps for these")
    head, _, rest = path.partition(".")
    if head == "nodes":
        node_id, _, param = rest.partition(".")
        ids = [n.id for n in spec.model.nodes]
        if node_id not in ids:
            return Problem(loc, f"names no node of the spec ({node_id!r})", expected="nodes.<node id>.<parameter>",
                           fix="use one of the node ids: " + ", ".join(ids))
        op = spec.node(node_id).op
        params = [prm.name for prm in REGISTRY.get(op).params] if op in REGISTRY else []
        if param not in params:
            return Problem(loc, f"is not a parameter of node {node_id} ({op})", node=node_id,
                           expected="one of: " + (", ".join(f"nodes.{node_id}.{p}" for p in params) or "(none)"))
        return None
    if path in SETTING_PATHS:
        return None
    near = [p for p in SETTING_PATHS if p.startswith(path.rsplit(".", 1)[0] + ".")] if "." in path else []
    choices = near or [p for p in SETTING_PATHS if p.startswith(f"{head}.")] or list(SETTING_PATHS)
    return Problem(loc, "is not a setting a sweep can change",
                   expected="a path like training.optimizer.lr, data.batch_size or nodes.<node id>.<parameter>",
                   fix="valid paths here: " + ", ".join(choices))


# --------------------------------------------------------------------------- expansion


def _show(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def _draw(rng: random.Random, domain: list[Any] | Range) -> Any:
    if isinstance(domain, list):
        return rng.choice(domain)
    if domain.scale == "log":
        value = math.exp(rng.uniform(math.log(domain.min), math.log(domain.max)))
    else:
        value = rng.uniform(domain.min, domain.max)
    return round(value) if domain.integer else float(f"{value:.6g}")


def _method_problems(sweep: SweepSpec) -> list[Problem]:
    problems = []
    for path, domain in sweep.parameters.items():
        loc = f"sweep.parameters.{path}"
        if isinstance(domain, Range):
            if sweep.method == "grid":
                problems.append(Problem(loc, "a grid needs a list of values, not a range", received="a range",
                                        fix='list the values, or use "method": "random"'))
            if domain.min >= domain.max:
                problems.append(Problem(loc, "min must be smaller than max", received=f"{domain.min:g}..{domain.max:g}"))
            elif domain.scale == "log" and domain.min <= 0:
                problems.append(Problem(loc, "a log range must be positive", received=f"min {domain.min:g}"))
        elif not domain:
            problems.append(Problem(loc, "lists no values", expected="at least one value"))
    if sweep.method == "grid":
        if sweep.samples is not None:
            problems.append(Problem("sweep.samples", "is for random sweeps only", received=str(sweep.samples),
                                    fix='remove it; a grid has one point per combination'))
        sizes = [len(d) for d in sweep.parameters.values() if isinstance(d, list)]
        count = math.prod(sizes) if sizes else 0
        if count > sweep.max_points:
            problems.append(Problem("sweep.max_points", "the grid has more points than the budget",
                                    received=f"{count} points", expected=f"at most max_points = {sweep.max_points}",
                                    fix="raise max_points, drop values, or use a random sweep with samples"))
    elif sweep.samples is None:
        problems.append(Problem("sweep.samples", "a random sweep needs the number of points to draw",
                                expected=f"1..max_points ({sweep.max_points})"))
    elif sweep.samples > sweep.max_points:
        problems.append(Problem("sweep.samples", "is over the budget", received=str(sweep.samples),
                                expected=f"at most max_points = {sweep.max_points}"))
    return problems


def point_values(sweep: SweepSpec) -> list[dict[str, Any]]:
    """The swept values of every point, in task order (grid: the last path varies fastest)."""
    paths = list(sweep.parameters)
    if sweep.method == "grid":
        lists = [d for d in sweep.parameters.values() if isinstance(d, list)]
        return [dict(zip(paths, combo, strict=True)) for combo in itertools.product(*lists)]
    rng = random.Random(sweep.seed)
    return [{p: _draw(rng, sweep.parameters[p]) for p in paths} for _ in range(sweep.samples or 0)]


def variant_doc(spec: PipelineSpec, values: dict[str, Any]) -> dict[str, Any]:
    """``spec`` as a document with ``values`` (path → value) set."""
    doc = spec.model_dump(mode="json")
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if head == "nodes":
            node_id, _, param = rest.partition(".")
            node = next(n for n in doc["model"]["nodes"] if n["id"] == node_id)
            node.setdefault("params", {})[param] = value
            continue
        parts = path.split(".")
        target = doc
        for key in parts[:-1]:
            target = target[key]
        target[parts[-1]] = value
    return doc


def expand_sweep(spec: PipelineSpec, sweep: SweepSpec) -> SweepPlan:
    """Every point as a validated spec; :class:`SpecError` with every problem of the sweep (its paths,
    its budget, each variant's spec) at once."""
    problems = _method_problems(sweep)
    expandable = not problems  # a grid over budget or with ranges, or random without samples: no points
    bad_paths = {path: p for path in sweep.parameters if (p := _path_problem(path, spec)) is not None}
    problems += [*bad_paths.values(), *_metric_problems(spec, sweep.metric)]
    points: list[SweepPoint] = []
    seen: dict[tuple[str, str, str | None], list[int]] = {}
    found: dict[tuple[str, str, str | None], Problem] = {}
    for index, values in enumerate(point_values(sweep) if expandable else []):
        try:  # the valid paths are still checked when others are not, so every problem shows at once
            variant = spec_from_dict(variant_doc(spec, {k: v for k, v in values.items() if k not in bad_paths}))
        except SpecError as exc:
            variant_problems = exc.problems
        else:
            variant_problems = analyse(variant).problems
            if not variant_problems:
                points.append(SweepPoint(index, values))  # the spec and analysis go: made again when needed
                continue
        for p in variant_problems:
            key = (p.location, p.message, p.received)
            seen.setdefault(key, []).append(index)
            found.setdefault(key, p)
    for key, indices in seen.items():
        p = found[key]
        where = ", ".join(map(str, indices[:10])) + (" …" if len(indices) > 10 else "")
        problems.append(Problem(p.location, f"{p.message} (sweep point{'s' if len(indices) > 1 else ''} {where})",
                                node=p.node, received=p.received, expected=p.expected,
                                fix=p.fix or "change the swept values so every point is a valid spec"))
    if problems:
        raise SpecError(problems)
    return SweepPlan(sweep, spec, points)


# what each task's generated program records (its Totals.metrics(), templates/common/_totals.py.j2)
TASK_METRICS = {"classification": ["loss", "accuracy"], "regression": ["loss", "mse", "mae"],
                "segmentation": ["loss", "pixel_accuracy", "mIoU"], "language_modeling": ["loss", "accuracy", "perplexity"]}


def _metric_problems(spec: PipelineSpec, metric: SweepMetric) -> list[Problem]:
    names = TASK_METRICS[spec.data.task]
    splits = ["val"] + (["test"] if spec.data.test_split > 0 else [])
    valid = [f"{s}_{n}" for s in splits for n in names]
    if metric.name in valid:
        return []
    return [Problem("sweep.metric.name", "is not a metric this program reports", received=metric.name,
                    expected="one of " + ", ".join(valid),
                    fix="result.json holds val_* (and test_* with a test split); see docs/generated-program.md")]


def best_index(scores: dict[int, float | None], goal: str) -> int | None:
    """The point with the best score (``goal`` ``max`` or ``min``); ``None`` when no point has one."""
    scored = {i: s for i, s in scores.items() if s is not None and math.isfinite(s)}
    if not scored:
        return None
    pick = max if goal == "max" else min
    return pick(scored, key=lambda i: (scored[i], -i) if goal == "max" else (scored[i], i))
