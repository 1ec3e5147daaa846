"""The generated programs, byte for byte, for golden cases × frameworks; and each one passes ``ruff check``.

A case in tests/golden/cases/<case>.json is a zoo template with changed data or training settings
(``template``, ``data``, ``training``) or a whole spec (``spec``); together the cases take the
templates' branches (schedules, optimizers, early stopping, augmentation, text, regression). The
expected files are tests/golden/<framework>/<case>/train.py and model.py, and
tests/golden/data/<case>/data.py and tests/golden/runtime/<case>/runtime.py (the data layer and the
run's records, files and command line are the same for every framework). After an
intended change to the templates or the mappers, re-record them with

    FLOWTRAIN_RECORD_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py

(that run fails on purpose, naming what it recorded) and review the diff like any other code change,
then run the test again without the variable.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import zoo
from core.codegen import Program, generate
from core.mapping.base import FRAMEWORKS
from core.spec import PipelineSpec

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
CASES = sorted(path.stem for path in (GOLDEN / "cases").glob("*.json"))
RECORD = os.environ.get("FLOWTRAIN_RECORD_GOLDEN") == "1"
RERECORD = "re-record with FLOWTRAIN_RECORD_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py"


def case_spec(case: str) -> PipelineSpec:
    doc = json.loads((GOLDEN / "cases" / f"{case}.json").read_text(encoding="utf-8"))
    if "spec" in doc:
        return PipelineSpec.model_validate(doc["spec"])
    spec = zoo.template(doc["template"]).model_dump(mode="json")
    for section in ("data", "training"):
        spec[section].update(doc.get(section, {}))
    return PipelineSpec.model_validate(spec)


def golden_files(framework: str, case: str) -> dict[str, Path]:
    return {"train.py": GOLDEN / framework / case / "train.py", "model.py": GOLDEN / framework / case / "model.py",
            "data.py": GOLDEN / "data" / case / "data.py", "runtime.py": GOLDEN / "runtime" / case / "runtime.py"}


@pytest.fixture(scope="module", params=[(fw, case) for fw in FRAMEWORKS for case in CASES],
                ids=lambda p: f"{p[0]}-{p[1]}")
def program(request: pytest.FixtureRequest) -> tuple[str, str, Program]:
    framework, case = request.param
    return framework, case, generate(case_spec(case), framework)


def test_cases_exist() -> None:
    assert len(CASES) >= 5, f"golden cases missing in {GOLDEN / 'cases'}"


def test_generated_files_match_the_golden_files(program: tuple[str, str, Program]) -> None:
    framework, case, generated = program
    if RECORD:  # a run that records proves nothing: it fails, so that CI is never green while recording
        changed = []
        for name, golden in golden_files(framework, case).items():
            if not golden.exists() or golden.read_text(encoding="utf-8") != generated.files[name]:
                golden.parent.mkdir(parents=True, exist_ok=True)
                golden.write_text(generated.files[name], encoding="utf-8")
                changed.append(name)
        pytest.fail(f"FLOWTRAIN_RECORD_GOLDEN=1: recorded {framework}/{case} ({', '.join(changed) or 'unchanged'}); "
                    "review the diff, then run the test again without it")
    for name, golden in golden_files(framework, case).items():
        assert golden.exists(), f"no golden file {golden}; {RERECORD}"
        assert generated.files[name] == golden.read_text(encoding="utf-8"), (
            f"{name} for {framework}/{case} differs from {golden}; if the change is intended, {RERECORD}")


def test_generated_program_passes_ruff(program: tuple[str, str, Program], tmp_path: Path) -> None:
    """``ruff check`` with its default rules, run in the program's folder as its user would (no project
    configuration applies there, and data.py, model.py and runtime.py are first-party modules)."""
    _, _, generated = program
    generated.write(tmp_path)
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                             "train.py", "model.py", "data.py", "runtime.py"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_main_reads_top_to_bottom(program: tuple[str, str, Program]) -> None:
    """train.py's main() is short, sets no module globals, and comes last."""
    framework, case, generated = program
    tree = ast.parse(generated.files["train.py"])
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    main = next(node for node in functions if node.name == "main")
    assert functions[-1] is main, f"{framework}/{case}: main() is not the last function"
    assert main.end_lineno - main.lineno < 60, f"{framework}/{case}: main() has {main.end_lineno - main.lineno} lines"
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Global)], f"{framework}/{case}: global"


def test_manifest_states_a_minimum_framework_version(program: tuple[str, str, Program]) -> None:
    framework, _, generated = program
    requirement = json.loads(generated.files["manifest.json"])["framework_requirement"]
    package = {"torch": "torch", "keras": "tensorflow", "paddle": "paddlepaddle"}[framework]
    assert requirement.startswith(f"{package}>="), requirement


FRAMEWORK_FREE = {"argparse", "hashlib", "json", "math", "os", "signal", "sys", "time", "dataclasses", "pathlib",
                  "numpy", "__future__", "data"}  # what runtime.py may import (data.py is numpy only)


def top_level_sources(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    return {node.name: ast.get_source_segment(source, node) for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def imported_modules(source: str) -> set[str]:
    return {alias.name.split(".")[0] for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
            for alias in node.names} | {node.module.split(".")[0] for node in ast.walk(ast.parse(source))
                                         if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("case", CASES)
def test_the_runtime_is_the_same_code_in_every_framework(case: str) -> None:
    """The run's records, checkpoint files, command line and speed switches are one module, runtime.py, the
    same text in the three programs and free of any framework, and so are the training loop (Run), the
    metric sums (Totals) and the epoch order; train.py imports them and defines none of them again. The
    learning-rate formula is one text in the three train.py."""
    spec = case_spec(case)
    generated = {fw: generate(spec, fw).files for fw in FRAMEWORKS}
    runtimes = {fw: files["runtime.py"] for fw, files in generated.items()}
    assert len(set(runtimes.values())) == 1, f"{case}: runtime.py differs between the frameworks"
    runtime = runtimes["torch"]
    assert imported_modules(runtime) <= FRAMEWORK_FREE, imported_modules(runtime) - FRAMEWORK_FREE
    shared = set(top_level_sources(runtime))
    assert {"Report", "LastError", "newest_checkpoint", "parse_args", "Run", "Totals", "epoch_batches"} <= shared
    programs = {fw: top_level_sources(files["train.py"]) for fw, files in generated.items()}
    for fw, functions in programs.items():
        assert not shared & set(functions), f"{fw}/{case}: train.py defines {sorted(shared & set(functions))} again"
    assert len({functions.get("lr_factor") for functions in programs.values()}) == 1, f"{case}: lr_factor differs"
