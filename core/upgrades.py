"""Registered upgrades between spec schema versions.

A document written for version N is carried to the current version by running the
upgrade registered for N, then for N+1, and so on. Each upgrade is a pure function
``dict -> dict`` that returns the document in the next version's shape; a version
with no registered upgrade is refused with a message, never guessed at.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from core.errors import Problem, SpecError

Document = dict[str, Any]
Upgrade = Callable[[Document], Document]


class UpgradeRegistry:
    def __init__(self, current: int) -> None:
        self.current = current
        self._upgrades: dict[int, Upgrade] = {}

    def register(self, from_version: int) -> Callable[[Upgrade], Upgrade]:
        """Decorator: ``fn`` turns a version ``from_version`` document into ``from_version + 1``."""

        def decorate(fn: Upgrade) -> Upgrade:
            if from_version in self._upgrades:
                raise ValueError(f"an upgrade from schema_version {from_version} is already registered")
            if from_version >= self.current:
                raise ValueError(
                    f"cannot register an upgrade from {from_version}: the current version is {self.current}"
                )
            self._upgrades[from_version] = fn
            return fn

        return decorate

    def upgrade(self, doc: Document) -> Document:
        version = doc.get("schema_version", self.current)
        if not isinstance(version, int) or isinstance(version, bool):
            raise SpecError([Problem("schema_version", "must be an integer", received=repr(version),
                                     expected=f"an integer, at most {self.current}")])
        if version > self.current:
            raise SpecError([Problem(
                "schema_version", "this spec was written by a newer FlowTrain",
                received=str(version), expected=f"at most {self.current}",
                fix="upgrade FlowTrain, or export the spec again from the portal you are using")])
        if version < self.current:
            doc = copy.deepcopy(doc)  # upgrades may edit in place; never the caller's document
        while version < self.current:
            step = self._upgrades.get(version)
            if step is None:
                raise SpecError([Problem(
                    "schema_version", f"no upgrade is registered from version {version}",
                    received=str(version), expected=f"one of {self.supported()}")])
            doc = step(doc)
            version += 1
            doc["schema_version"] = version
        return doc

    def supported(self) -> list[int]:
        return sorted({*self._upgrades, self.current})


def default_registry() -> UpgradeRegistry:
    from core.spec import SCHEMA_VERSION

    return UpgradeRegistry(SCHEMA_VERSION)


UPGRADES = default_registry()


@UPGRADES.register(1)
def _v1_to_v2(doc: Document) -> Document:
    """Version 2 added composite blocks (``model.blocks``, empty by default): a version-1 document is
    already a valid version-2 one. Only ``schema_version`` changes (the registry sets it), and such a
    spec keeps its hash (:meth:`core.spec.PipelineSpec.spec_hash`)."""
    return doc
