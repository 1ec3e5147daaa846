"""Names checked with a regular expression match the whole string (issue 10, finding 10).

``^...$`` with ``re.match`` lets a trailing newline through (``$`` matches before a final ``\\n``),
and a name with a newline can end up in a path, a job script or generated code. Every pattern is
used with ``fullmatch``: each checker below refuses ``name + "\\n"``, and no module of FlowTrain
compiles or matches a pattern that relies on ``$``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.errors import FlowTrainError
from core.mapping.base import ident
from schedulers.accounting import read_accounting
from schedulers.base import SchedulerError
from schedulers.registry.runs import RunRegistry
from settings.access import AccessError, check_user_name
from settings.environments import parse_environments

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "settings", "schedulers", "portal", "cli")


def test_every_name_check_refuses_a_trailing_newline(tmp_path: Path) -> None:
    assert ident("conv1") == "conv1"
    with pytest.raises(ValueError, match="not a safe generated identifier"):
        ident("conv1\n")
    with pytest.raises(AccessError, match="not accepted"):
        check_user_name("alice\n")
    with pytest.raises(SchedulerError, match="is not a user name"):
        read_accounting("alice\n")  # refused before any Slurm command runs
    with pytest.raises(FlowTrainError, match=r"environments\[0\]\.module"):
        parse_environments({"environments": [{"name": "x", "module": "torch/2.1\n"}]})
    registry = RunRegistry(home=tmp_path / "home")
    with pytest.raises(FlowTrainError, match="run id 'r1\\\\n' is invalid"):
        registry.create_run(user="alice", spec_json="{}", spec_hash="h", framework="torch", scheduler="local",
                            run_id="r1\n")
    with pytest.raises(FlowTrainError, match="user name .* is invalid"):
        registry.create_run(user="alice\n", spec_json="{}", spec_hash="h", framework="torch", scheduler="local")
    assert registry.list_runs() == []


def _dollar_patterns(path: Path) -> list[str]:
    """``re.compile``/``re.match``/``re.search`` calls in ``path`` whose pattern literal ends with ``$``.

    A pattern compiled with ``re.M`` scans many lines of a log for lines it recognises (``$`` is each
    line's end there, by design); it validates no value, so it is not one of these.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"compile", "match", "search"} and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and node.args[0].value.endswith("$") and not node.args[0].value.endswith("\\$")
                and not _multiline(node)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _multiline(call: ast.Call) -> bool:
    flags = [ast.unparse(a) for a in call.args[1:]] + [ast.unparse(k.value) for k in call.keywords if k.arg == "flags"]
    return any(name in flag for flag in flags for name in ("re.M", "re.MULTILINE"))


def test_no_pattern_relies_on_dollar() -> None:
    found = [hit for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for hit in _dollar_patterns(path)]
    assert found == [], f"use fullmatch without ^/$ instead: {found}"
