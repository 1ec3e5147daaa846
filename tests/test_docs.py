"""Shipped documents that are generated from the code stay in step with it."""

from __future__ import annotations

from pathlib import Path

from cli.codegen import support_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_support_table_in_docs_is_current() -> None:
    shipped = (ROOT / "docs" / "support-table.md").read_text(encoding="utf-8")
    assert shipped == support_markdown(), (
        "docs/support-table.md is stale: run `.venv/bin/python -m flowtrain support-table > docs/support-table.md`")


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ")[0]
    assert "scripts/portal.sh" in head and "scripts/test.sh" in head
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
