"""Reading a spec from text, a file or a dict, with every structural problem reported at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import CommandError, Problem, SpecError
from core.spec import PipelineSpec
from core.upgrades import UPGRADES, UpgradeRegistry

MAX_SPEC_BYTES = 64 * 1024 * 1024


def spec_from_dict(doc: Any, upgrades: UpgradeRegistry = UPGRADES) -> PipelineSpec:
    if not isinstance(doc, dict):
        raise SpecError([Problem("(document)", "a pipeline spec must be a JSON object",
                                 received=type(doc).__name__, expected="an object with data, model, training")])
    doc = upgrades.upgrade(doc)
    try:
        return PipelineSpec.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(problems_from_pydantic(exc, doc)) from None


def spec_from_json(text: str | bytes, source: str = "<spec>") -> PipelineSpec:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError([Problem(
            source, "is not valid JSON", received=f"{exc.msg} at line {exc.lineno} column {exc.colno}",
            expected="a JSON object", fix="check the brackets, quotes and commas near that position")]) from None
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(source, "cannot be read as JSON", received=f"a byte that is not UTF-8 at {exc.start}",
                                 expected="UTF-8 encoded JSON")]) from None
    except RecursionError:
        raise SpecError([Problem(
            source, "is nested too deeply to be read", received="more levels of nested brackets than the JSON "
            "reader allows (about a thousand)", expected="a pipeline spec, which nests about six levels deep",
            fix="check that this is the right file")]) from None
    return spec_from_dict(doc)


def load_spec(path: str | Path) -> PipelineSpec:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise CommandError(f"{p}: {size} bytes is larger than the {MAX_SPEC_BYTES} byte limit for a spec")
        data = p.read_bytes()
    except FileNotFoundError:
        raise CommandError(f"{p}: no such file; pass the path of a pipeline spec (JSON)") from None
    except IsADirectoryError:
        raise CommandError(f"{p}: is a directory; pass the path of a pipeline spec (JSON)") from None
    except PermissionError:
        raise CommandError(f"{p}: permission denied") from None
    return spec_from_json(data, source=str(p))


def _location(loc: tuple[Any, ...], doc: dict[str, Any]) -> tuple[str, str | None]:
    """Turn pydantic's ``('model', 'nodes', 3, 'op')`` into ``model.nodes[conv1].op`` and the node id."""
    parts: list[str] = []
    node_id: str | None = None
    cursor: Any = doc
    for i, key in enumerate(loc):
        if isinstance(key, int):
            label = str(key)
            if isinstance(cursor, list) and 0 <= key < len(cursor):
                item = cursor[key]
                if loc[i - 1:i] == ("nodes",) and isinstance(item, dict) and isinstance(item.get("id"), str):
                    node_id = item["id"]
                    label = json.dumps(node_id, ensure_ascii=True)[1:-1]
                cursor = item
            else:
                cursor = None
            if parts:
                parts[-1] += f"[{label}]"
            else:
                parts.append(f"[{label}]")
            continue
        parts.append(str(key))
        cursor = cursor.get(key) if isinstance(cursor, dict) else None
    return ".".join(parts) or "(document)", node_id


def problems_from_pydantic(exc: ValidationError, doc: dict[str, Any]) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        # Discriminated unions add the tag to the location (e.g. `...preprocessing[0].resize.size`).
        loc = tuple(err["loc"])
        location, node_id = _location(loc, doc)
        received = err.get("input")
        kind = err["type"]
        message = err["msg"]
        fix = None
        if kind == "extra_forbidden":
            message = "unknown key"
            fix = "remove it or check its spelling against `python -m flowtrain schema`"
            received = None
        elif kind == "missing":
            message = "required key is missing"
            received = None
        elif kind == "string_pattern_mismatch":
            fix = "use letters, digits, '_', '.' and '-' only (at most 64, not starting with '.' or '-')"
        problems.append(Problem(location, message, node=node_id,
                                received=None if received is None else _short_repr(received), fix=fix))
    return problems


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
