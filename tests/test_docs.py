"""Shipped documents that are generated from the code stay in step with it."""

from __future__ import annotations

from pathlib import Path

from cli.codegen import support_markdown
from flowtrain import build_parser

ROOT = Path(__file__).resolve().parent.parent


def test_support_table_in_docs_is_current() -> None:
    shipped = (ROOT / "docs" / "support-table.md").read_text(encoding="utf-8")
    assert shipped == support_markdown(), (
        "docs/support-table.md is stale: run `.venv/bin/python -m flowtrain support-table > docs/support-table.md`")


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ")[0]
    assert "scripts/portal.sh" in head and "scripts/test.sh" in head
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_readme_lists_every_command() -> None:
    """The README's command list names every command but the old names kept as aliases."""
    listing = (ROOT / "README.md").read_text(encoding="utf-8").split("## Command line")[1].split("\n## ")[0]
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    helps = {c.dest: c.help or "" for c in sub._choices_actions}  # type: ignore[attr-defined]
    current = [name for name in helps if not helps[name].startswith("old name")]
    assert len(current) > 20 and "zoo" in current and "settings-schema" in current
    missing = [name for name in current if f"python -m flowtrain {name}" not in listing
               and f"| {name}" not in listing]
    assert missing == [], f"README's command list lacks {missing}"
