"""A run named on the command line by its id or by its name (``predict``, ``export-onnx``).

An id wins; otherwise the acting user's runs with that name: one is the run, several are refused
with their ids, none is "not found". Only ``get`` and ``list_runs`` of the registry are used.
"""

from __future__ import annotations

from typing import Protocol

from core.errors import CommandError
from schedulers.registry.records import Run, RunNotFound


class RunList(Protocol):
    """What the look-up needs of the run registry (:class:`schedulers.registry.runs.RunRegistry` is one)."""

    def get(self, run_id: str, user: str | None = None) -> Run: ...

    def list_runs(self, user: str | None = None) -> list[Run]: ...


def find_run(registry: RunList, ref: str, user: str) -> Run:
    """The run ``ref`` (an id, or a name) of ``user``, with its spec."""
    try:
        return registry.get(ref, user)
    except RunNotFound:
        pass
    named = [r for r in registry.list_runs(user) if r.name == ref]
    if not named:
        raise RunNotFound(f"no run {ref!r} (by id or by name) for user {user}; "
                          "`python -m flowtrain runs` lists the runs")
    if len(named) > 1:
        ids = ", ".join(f"{r.id} ({r.state.value})" for r in named)
        raise CommandError(f"{len(named)} runs are named {ref!r}: {ids}; give one of these run ids")
    return registry.get(named[0].id, user)
