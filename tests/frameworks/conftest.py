"""Fixtures shared by the framework tests: every framework's outputs for the op catalogue and the
zoo templates (tests/frameworks/groups.py), computed once per session with one subprocess per
framework and group (importing the frameworks is the slow part). The equivalence tests compare
the frameworks with each other; the ONNX tests compare each framework with onnxruntime on the
export of the same weights."""

from __future__ import annotations

import pytest

from core.equivalence import Report, check_many, small_batch, small_zoo_spec
from tests.frameworks.groups import ONE_OP, TOLERANCE, ZOO_SMALL


@pytest.fixture(scope="session")
def one_op_reports() -> dict[str, Report]:
    return check_many(ONE_OP, tolerance=TOLERANCE)


@pytest.fixture(scope="session")
def zoo_reports() -> dict[str, Report]:
    return check_many({n: small_zoo_spec(n) for n in ZOO_SMALL}, tolerance=TOLERANCE,
                      batch={n: small_batch(n) for n in ZOO_SMALL})
