"""The frameworks FlowTrain generates programs for: the one list every layer imports.

The spec's ``training.framework``, the converter registries, the code generator, the selector,
the Slurm launch lines and the environments file all take their names from here.
"""

from __future__ import annotations

FRAMEWORKS: tuple[str, ...] = ("torch", "keras", "paddle")
