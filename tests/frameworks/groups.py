"""The graphs the framework tests run in groups (tests/frameworks/conftest.py runs each group once
per session, one subprocess per framework): the op catalogue's cases and the zoo templates."""

from __future__ import annotations

from core import zoo
from core.equivalence import BATCH_ONE
from tests.op_cases import flatten_linear_spec, specs

TOLERANCE = 1e-4
ONE_OP = {**specs(), "flatten-linear": flatten_linear_spec()}
ZOO = [e.name for e in zoo.entries()]
ZOO_SMALL = [n for n in ZOO if n not in BATCH_ONE]  # small enough for a CPU at the sizes of small_zoo_spec
