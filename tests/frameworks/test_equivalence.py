"""check-equivalence: every case of the op catalogue (tests/op_cases.py) and every zoo template that all
three frameworks can express gives the same outputs (and BatchNorm running statistics) for the same
weights, within 1e-4.

Each group runs with one subprocess per framework (core.equivalence.check_many, in the session
fixtures of tests/frameworks/conftest.py, which the ONNX tests share): importing the frameworks is
the slow part. AlexNet (61 M weights at 224×224, batch 1) is `slow`. VGG-16 (138 M) is validated
and counted (tests/core/test_zoo.py) and trained from a streamed folder (tests/frameworks/test_streaming.py),
not run here: every op and parameter it has (Conv2d 3×3 padding 1, ReLU,
MaxPool2d, AdaptiveAvgPool2d to its own size, Flatten, Linear, Dropout) AlexNet has too, at the same
224×224 input through the same converters, and its weights in three frameworks cost ~30 s of CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.equivalence import (
    BATCH_ONE,
    FrameworkOutcome,
    Report,
    check,
    small_zoo_spec,
    wants_train_update,
)
from core.mapping.base import FRAMEWORKS
from core.validate import validate
from tests.frameworks.groups import ONE_OP, TOLERANCE, ZOO_SMALL
from tests.op_cases import one_op_spec

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[2]


def assert_equivalent(report: Report) -> None:
    failed = {fw: o.reason for fw, o in report.frameworks.items() if o.status == "failed"}
    assert not failed, f"{report.name}: {failed}"
    bad = [p.to_dict() for p in report.pairs if not p.ok]
    assert not bad, f"{report.name}: {bad}"
    assert report.ok


@pytest.mark.parametrize("name", sorted(ONE_OP))
def test_one_op_graph_is_equivalent(name: str, one_op_reports: dict[str, Report]) -> None:
    report = one_op_reports[name]
    assert_equivalent(report)
    assert report.compared == list(FRAMEWORKS), report.text()  # every op is in every framework's catalogue


@pytest.mark.parametrize("name", ZOO_SMALL)
def test_zoo_template_is_equivalent(name: str, zoo_reports: dict[str, Report]) -> None:
    report = zoo_reports[name]
    assert_equivalent(report)
    assert report.compared == list(FRAMEWORKS), report.text()  # every op has a converter in every framework
    assert report.compared == list(FRAMEWORKS)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in BATCH_ONE if n != "vgg16"])  # why not VGG-16: the docstring
def test_large_imagenet_template_is_equivalent(name: str) -> None:
    assert_equivalent(check(small_zoo_spec(name), tolerance=TOLERANCE, batch=1))


@pytest.mark.parametrize("name", [n for n in sorted(ONE_OP) if n.startswith("BatchNorm")])
def test_batch_norm_training_update_matches_torch(name: str, one_op_reports: dict[str, Report]) -> None:
    """One training-mode forward moves the running statistics identically (torch's unbiased variance)."""
    report = one_op_reports[name]
    assert wants_train_update(validate(ONE_OP[name]))
    assert all(p.running_stats_diff is not None and p.running_stats_diff <= TOLERANCE for p in report.pairs)
    torch_after = report.frameworks["torch"].after
    assert set(torch_after) >= {"node/running_mean", "node/running_var"}


def test_resnet_templates_check_running_statistics_too(zoo_reports: dict[str, Report]) -> None:
    pairs = zoo_reports["resnet18_cifar"].pairs
    assert pairs and all(p.running_stats_diff is not None for p in pairs)


def test_frameworks_that_refuse_a_graph_are_reported_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    import core.equivalence as eq

    real = eq._not_expressible
    monkeypatch.setattr(eq, "_not_expressible",
                        lambda analysis, fw: "refused for this test" if fw == "keras" else real(analysis, fw))
    report = check(one_op_spec("tanh", "Tanh", (4,)), frameworks=("torch", "keras"))
    assert report.frameworks["keras"] == FrameworkOutcome("not expressible", "refused for this test")
    assert report.frameworks["torch"].status == "ok" and report.pairs == [] and report.ok


def test_a_framework_that_is_not_installed_fails_the_check_and_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked before anything runs: the report names the missing package and how to leave it out."""
    import core.equivalence as eq

    monkeypatch.setitem(eq.PACKAGES, "keras", ("keras", "flowtrain_absent_backend"))
    report = check(one_op_spec("tanh", "Tanh", (4,)), frameworks=("keras",))
    outcome = report.frameworks["keras"]
    assert outcome.status == "not installed"
    assert "flowtrain_absent_backend" in outcome.reason and "--frameworks torch paddle" in outcome.reason
    assert not report.ok and "NOT EQUIVALENT" in report.text()


def test_cli_prints_json(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(one_op_spec("conv", "Conv2d", (3, 8, 8), {"out_channels": 4, "kernel_size": 3, "stride": 2,
                                                             "padding": "same"}).to_json())
    result = subprocess.run([sys.executable, "-m", "flowtrain", "check-equivalence", str(spec), "--json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads(result.stdout)
    assert set(doc) >= {"frameworks", "pairs", "ok"} and doc["ok"] is True
    assert {fw for fw, o in doc["frameworks"].items() if o["status"] == "ok"} == set(FRAMEWORKS)
    assert len(doc["pairs"]) == 3
    for pair in doc["pairs"]:
        assert set(pair) >= {"a", "b", "max_abs_diff", "ok"} and pair["max_abs_diff"] <= TOLERANCE
