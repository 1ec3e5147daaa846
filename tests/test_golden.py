"""The generated programs, byte for byte, for golden cases × frameworks; and each one passes ``ruff check``.

A case in tests/golden/cases/<case>.json is a zoo template with changed data or training settings
(``template``, ``data``, ``training``) or a whole spec (``spec``); together the cases take the
templates' branches (schedules, optimizers, early stopping, augmentation, text, regression). The
expected files are tests/golden/<framework>/<case>/train.py, model.py and devices.py (and optim.py where the program has one), and
tests/golden/data/<case>/data.py and tests/golden/runtime/<case>/runtime.py and loop.py (the data layer,
the run's records, files and command line, and the training loop are the same for every framework). After an
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
RUFF = Path(sys.executable).with_name("ruff")  # the binary itself: no Python start-up per check
RERECORD = "re-record with FLOWTRAIN_RECORD_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py"


def case_spec(case: str) -> PipelineSpec:
    doc = json.loads((GOLDEN / "cases" / f"{case}.json").read_text(encoding="utf-8"))
    if "spec" in doc:
        return PipelineSpec.model_validate(doc["spec"])
    spec = zoo.template(doc["template"]).model_dump(mode="json")
    for section in ("data", "training"):
        spec[section].update(doc.get(section, {}))
    return PipelineSpec.model_validate(spec)


SHARED_FILES = {"data.py": "data", "runtime.py": "runtime", "loop.py": "runtime"}  # the same in every framework


def golden_files(framework: str, case: str, generated: Program) -> dict[str, Path]:
    """The golden file of each generated module: the shared ones under data/ and runtime/, the framework's
    own (train.py, model.py, devices.py, and optim.py where the program has one) under <framework>/."""
    return {name: GOLDEN / SHARED_FILES.get(name, framework) / case / name
            for name in sorted(generated.files) if name.endswith(".py")}


@pytest.fixture(scope="module", params=[(fw, case) for fw in FRAMEWORKS for case in CASES],
                ids=lambda p: f"{p[0]}-{p[1]}")
def program(request: pytest.FixtureRequest) -> tuple[str, str, Program]:
    framework, case = request.param
    return framework, case, generate(case_spec(case), framework)


def test_cases_exist() -> None:
    assert len(CASES) >= 5, f"golden cases missing in {GOLDEN / 'cases'}"


def test_generated_files_match_the_golden_files(program: tuple[str, str, Program]) -> None:
    framework, case, generated = program
    expected = golden_files(framework, case, generated)
    if RECORD:  # a run that records proves nothing: it fails, so that CI is never green while recording
        changed = []
        for stale in set((GOLDEN / framework / case).glob("*.py")) - set(expected.values()):
            stale.unlink()
            changed.append(f"{stale.name} removed")
        for name, golden in expected.items():
            if not golden.exists() or golden.read_text(encoding="utf-8") != generated.files[name]:
                golden.parent.mkdir(parents=True, exist_ok=True)
                golden.write_text(generated.files[name], encoding="utf-8")
                changed.append(name)
        pytest.fail(f"FLOWTRAIN_RECORD_GOLDEN=1: recorded {framework}/{case} ({', '.join(changed) or 'unchanged'}); "
                    "review the diff, then run the test again without it")
    stale = set((GOLDEN / framework / case).glob("*.py")) - set(expected.values())
    assert not stale, f"{framework}/{case}: golden files the program no longer has: {sorted(stale)}; {RERECORD}"
    for name, golden in expected.items():
        assert golden.exists(), f"no golden file {golden}; {RERECORD}"
        assert generated.files[name] == golden.read_text(encoding="utf-8"), (
            f"{name} for {framework}/{case} differs from {golden}; if the change is intended, {RERECORD}")


# The project's rules (ruff.toml), which excludes tests/golden from its own runs.
PROJECT_RULES = ["--select", "E4,E7,E9,F,W,I,UP,B", "--ignore", "B905", "--line-length", "120", "--target-version", "py311"]


def test_generated_program_passes_ruff(program: tuple[str, str, Program], tmp_path: Path) -> None:
    """``ruff check`` with the project's rules and ``ruff format --check``, run in the program's folder as its
    user would (no project configuration applies there, and the program's other modules are first-party): the program a researcher takes home is formatted and lint-clean."""
    _, _, generated = program
    generated.write(tmp_path)
    python = sorted(name for name in generated.files if name.endswith(".py"))
    for command in (["check", *PROJECT_RULES], ["format", "--check", "--line-length", "120"]):
        result = subprocess.run([RUFF, *command, "--isolated", "--no-cache", *python],
                                capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, f"ruff {command[0]}: " + result.stdout + result.stderr


def test_golden_files_are_formatted() -> None:
    """Every golden file as committed passes ``ruff format --check`` (one ruff run for all of them)."""
    files = sorted(str(path.relative_to(GOLDEN)) for path in GOLDEN.rglob("*.py"))
    result = subprocess.run([RUFF, "format", "--check", "--isolated", "--no-cache",
                             "--line-length", "120", *files], capture_output=True, text=True, cwd=GOLDEN)
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


FRAMEWORK_FREE = {"argparse", "ctypes", "hashlib", "json", "math", "os", "platform", "re", "signal", "socket", "struct", "sys", "time",
                  "dataclasses", "pathlib", "numpy", "__future__", "data", "runtime"}  # what runtime.py and loop.py may import


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
    """The run's records, checkpoint files, command line and speed switches are one module, runtime.py, and
    the training loop (Run) another, loop.py: each the same text in the three programs and free of any
    framework, and so are the metric sums (Totals) and the epoch order; train.py imports them and defines
    none of them again. The learning-rate formula is one text in the three train.py."""
    spec = case_spec(case)
    generated = {fw: generate(spec, fw).files for fw in FRAMEWORKS}
    shared: set[str] = set()
    for module in ("runtime.py", "loop.py"):
        texts = {fw: files[module] for fw, files in generated.items()}
        assert len(set(texts.values())) == 1, f"{case}: {module} differs between the frameworks"
        assert imported_modules(texts["torch"]) <= FRAMEWORK_FREE, imported_modules(texts["torch"]) - FRAMEWORK_FREE
        shared |= set(top_level_sources(texts["torch"]))
    assert {"Report", "LastError", "newest_checkpoint", "parse_args", "Run", "Totals", "epoch_batches"} <= shared
    programs = {fw: top_level_sources(files["train.py"]) for fw, files in generated.items()}
    for fw, functions in programs.items():
        assert not shared & set(functions), f"{fw}/{case}: train.py defines {sorted(shared & set(functions))} again"
    assert len({functions.get("lr_factor") for functions in programs.values()}) == 1, f"{case}: lr_factor differs"


# The mlp case's train.py, as committed: at most this many lines, with the loss, the optimizer and the
# training step within the first READ_WITHIN (issue 22: 250 and 120 in every framework).
MLP_TRAIN_LINES = {"torch": 250, "keras": 250, "paddle": 250}
READ_WITHIN = {"torch": 120, "keras": 120, "paddle": 120}
READ_FIRST = {"torch": ("def compute_loss", "def make_optimizer", "def train_step"),
              "keras": ("def per_sample_loss", "def make_optimizer", "def train_step"),
              "paddle": ("def compute_loss", "def make_optimizer", "def train_step")}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mlp_train_py_is_short_and_reads_the_training_first(framework: str) -> None:
    lines = (GOLDEN / framework / "mlp" / "train.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MLP_TRAIN_LINES[framework], f"{framework}: mlp train.py has {len(lines)} lines"
    for definition in READ_FIRST[framework]:
        line = next((i for i, text in enumerate(lines, 1) if text.strip().startswith(definition)), None)
        assert line is not None and line <= READ_WITHIN[framework], f"{framework}: {definition!r} at line {line}"
