"""The layout says what it holds: which package may import which, read from every .py file's imports
(module level and inside functions alike), so an arrow that runs back up fails here.

    cli, portal ──▶ schedulers ──▶ settings ──▶ core
         └────────────┴──────────────┴──────────▶ core

``core`` is the framework-free heart: it imports nothing above it, and no framework (torch,
tensorflow, keras, paddle) except in the subprocess worker that runs the generated models.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "settings", "schedulers", "portal", "cli")
FRAMEWORK_MODULES = {"torch", "tensorflow", "keras", "paddle"}
FRAMEWORK_WORKERS = {"core/model_worker.py"}  # runs in its own process, one framework at a time

# package -> top-level modules it must never import
FORBIDDEN = {
    "core": {"portal", "schedulers", "cli", "settings", "streamlit", "flowtrain"},
    "settings": {"portal", "schedulers", "cli", "streamlit", "flowtrain"},
    "schedulers": {"portal", "cli", "streamlit", "flowtrain"},
    "portal": {"cli", "flowtrain"},
    "cli": {"portal", "streamlit"},
}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every import in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def full_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in the file, at any depth (``from a.b import c``: a.b.c
    as well as a.b, since c may be a module)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def sources(package: str) -> list[Path]:
    return sorted(p for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_runs_back_up(package: str) -> None:
    files = sources(package)
    assert files, f"{package}/ has no Python files: is the layout in this test out of date?"
    wrong = [f"{p.relative_to(REPO)}:{line} imports {mod}"
             for p in files for line, mod in imports(p) if mod in FORBIDDEN[package]]
    assert not wrong, f"{package}/ must not import {sorted(FORBIDDEN[package])}:\n" + "\n".join(wrong)


def test_core_never_imports_a_framework_outside_its_worker() -> None:
    wrong = [f"{p.relative_to(REPO)}:{line} imports {mod}"
             for p in sources("core") if p.relative_to(REPO).as_posix() not in FRAMEWORK_WORKERS
             for line, mod in imports(p) if mod in FRAMEWORK_MODULES]
    assert not wrong, "core/ generates code for the frameworks but never runs them:\n" + "\n".join(wrong)
    for worker in FRAMEWORK_WORKERS:  # the exception is real, not a stale name
        assert {m for _, m in imports(REPO / worker)} & FRAMEWORK_MODULES, worker


def test_the_walker_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import os.path\n\ndef f():\n    from schedulers.registry.runs import RunRegistry\n"
                      "    import torch as t\n    from . import sibling\n", encoding="utf-8")
    assert imports(sample) == [(1, "os"), (4, "schedulers"), (5, "torch")]


def test_every_top_level_folder_is_on_the_readme_map() -> None:
    """The table under "The pipeline" names every top-level folder that holds code or docs."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## The pipeline", 1)[1].split("\n## ", 1)[0]
    not_code = {"var", "runs", "test-artifacts", "data"}  # state and user data (.gitignore, default data root)
    folders = sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
                     and p.name not in not_code)
    missing = [f for f in folders if f"`{f}/" not in table]
    assert not missing, f"README's map lacks {missing}"


# The registry records and answers: it asks no executor and exports no model (reconcile and the
# exports are the orchestrator's: schedulers/reconcile.py, schedulers/model_export.py).
REGISTRY_FORBIDDEN = ("schedulers.local", "schedulers.slurm", "schedulers.launch", "schedulers.reconcile",
                      "schedulers.sweeps", "schedulers.model_export", "schedulers.rank_errors", "core.onnx_export",
                      "core.trained")


def test_the_registry_imports_no_executor_and_no_exporter() -> None:
    files = sources("schedulers/registry")
    assert {p.name for p in files} >= {"db.py", "runs.py", "sweeps.py", "files.py"}, files
    wrong = [f"{p.relative_to(REPO)}:{line} imports {mod}" for p in files for line, mod in full_imports(p)
             if any(mod == f or mod.startswith(f + ".") for f in REGISTRY_FORBIDDEN)]
    assert not wrong, "schedulers/registry/ only records:\n" + "\n".join(wrong)


def test_the_registry_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from schedulers import model_export\n    import schedulers.slurm.executor\n",
                      encoding="utf-8")
    mods = [m for _, m in full_imports(sample)]
    assert "schedulers.model_export" in mods and "schedulers.slurm.executor" in mods
