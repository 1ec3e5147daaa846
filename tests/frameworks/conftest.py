"""Fixtures shared by the framework tests: every framework's outputs for the op catalogue and the
zoo templates (tests/frameworks/groups.py), computed once per session with one subprocess per
framework for both groups (importing the frameworks is the slow part: one group each cost every
framework's start-up twice). The equivalence tests compare the frameworks with each other; the ONNX
tests compare each framework with onnxruntime on the export of the same weights."""

from __future__ import annotations

import pytest

from core.equivalence import Report, check_many, small_batch, small_zoo_spec
from tests.frameworks.groups import ONE_OP, TOLERANCE, ZOO_SMALL


@pytest.fixture(scope="session")
def framework_reports() -> dict[str, Report]:
    """Both groups in one check: each case's weights and inputs come from the check's seed alone, not
    from its place in the group, so every report is the one its group alone would give."""
    zoo = {n: small_zoo_spec(n) for n in ZOO_SMALL}
    assert not set(zoo) & set(ONE_OP), "an op case and a zoo template share a name"
    return check_many({**ONE_OP, **zoo}, tolerance=TOLERANCE, batch={n: small_batch(n) for n in ZOO_SMALL})


@pytest.fixture(scope="session")
def one_op_reports(framework_reports: dict[str, Report]) -> dict[str, Report]:
    return {name: framework_reports[name] for name in ONE_OP}


@pytest.fixture(scope="session")
def zoo_reports(framework_reports: dict[str, Report]) -> dict[str, Report]:
    return {name: framework_reports[name] for name in ZOO_SMALL}
