"""The model zoo: built-in pipelines, registered by name (``python -m flowtrain zoo``).

Not to be confused with ``templates/``, the Jinja files the generated programs are written from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.errors import CommandError
from core.spec import PipelineSpec


@dataclass(frozen=True)
class ZooEntry:
    name: str
    summary: str
    build: Callable[[], PipelineSpec]


_ZOO: dict[str, ZooEntry] = {}


def zoo_model(name: str, summary: str) -> Callable[[Callable[[], PipelineSpec]], Callable[[], PipelineSpec]]:
    def decorate(fn: Callable[[], PipelineSpec]) -> Callable[[], PipelineSpec]:
        if name in _ZOO:
            raise ValueError(f"zoo pipeline {name!r} is already registered")
        _ZOO[name] = ZooEntry(name, summary, fn)
        return fn

    return decorate


def entries() -> list[ZooEntry]:
    _load()
    return [_ZOO[k] for k in sorted(_ZOO)]


def template(name: str) -> PipelineSpec:
    _load()
    if name not in _ZOO:
        raise CommandError(f"no built-in pipeline named {name!r}; choose one of: {', '.join(sorted(_ZOO))}")
    return _ZOO[name].build()


def _load() -> None:
    from core.zoo import gpt, segmentation, text, vision, vit  # noqa: F401  (registrations)
