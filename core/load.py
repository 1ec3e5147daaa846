"""Reading a spec from text, a file or a dict, with every structural problem reported at once.

Numbers are finite: JSON's non-standard ``Infinity``, ``-Infinity`` and ``NaN`` (which Python's
``json`` accepts by default) and non-finite floats in a dict are problems naming their field, so
they never reach the validator or a code generator. A spec file or upload is at most
:data:`MAX_SPEC_BYTES`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import CommandError, Problem, SpecError
from core.spec import BLOCK_NAME_PATTERN, PipelineSpec
from core.upgrades import UPGRADES, UpgradeRegistry

MAX_SPEC_BYTES = 10 * 1024 * 1024  # a 10,000-node graph is ~2 MB of JSON


class _NonFinite(float):
    """What the JSON parser makes of ``Infinity``/``-Infinity``/``NaN``: found and reported by field."""

    def __new__(cls, text: str) -> _NonFinite:
        obj = super().__new__(cls, float(text.replace("Infinity", "inf")))
        obj.text = text
        return obj

    text: str


MAX_INT_DIGITS = 100  # far beyond any spec value; Python converts at most 4,300 digits (a ValueError past it)


class _HugeInt(str):
    """What the JSON parser makes of an integer of more than :data:`MAX_INT_DIGITS` digits: kept as its
    text (never converted), found and reported by field."""


def _parse_int(text: str) -> int | _HugeInt:
    return _HugeInt(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def _non_finite(doc: Any, loc: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], float | _HugeInt]]:
    """(location, value) of every non-finite number (and every over-long integer) in ``doc``."""
    if isinstance(doc, float) and not math.isfinite(doc) or isinstance(doc, _HugeInt):
        return [(loc, doc)]
    if isinstance(doc, dict):
        return [found for k, v in doc.items() for found in _non_finite(v, (*loc, k))]
    if isinstance(doc, (list, tuple)):
        return [found for i, v in enumerate(doc) for found in _non_finite(v, (*loc, i))]
    return []


def _non_finite_problems(doc: dict[str, Any]) -> list[Problem]:
    problems = []
    for loc, value in _non_finite(doc):
        location, node_id = _location(loc, doc)
        if isinstance(value, _HugeInt):
            digits = len(value.lstrip("-"))
            problems.append(Problem(location, f"is an integer of {digits:,} digits", node=node_id,
                                    received=f"{value[:20]}… ({digits:,} digits)",
                                    expected=f"a number of at most {MAX_INT_DIGITS} digits",
                                    fix="use an ordinary number"))
            continue
        shown = value.text if isinstance(value, _NonFinite) else repr(value)
        problems.append(Problem(location, "is not a finite number", node=node_id, received=shown,
                                expected="a finite number", fix="use an ordinary number (JSON has no Infinity or NaN)"))
    return problems


def spec_from_dict(doc: Any, upgrades: UpgradeRegistry = UPGRADES) -> PipelineSpec:
    if not isinstance(doc, dict):
        raise SpecError([Problem("(document)", "a pipeline spec must be a JSON object",
                                 received=type(doc).__name__, expected="an object with data, model, training")])
    non_finite = _non_finite_problems(doc)
    if non_finite:
        raise SpecError(non_finite)
    doc = upgrades.upgrade(doc)
    try:
        return PipelineSpec.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(problems_from_pydantic(exc, doc)) from None


def spec_from_json(text: str | bytes, source: str = "<spec>") -> PipelineSpec:
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError([Problem(source, "is too large for a pipeline spec", received=f"{len(text):,} bytes",
                                 expected=f"at most {MAX_SPEC_BYTES:,} bytes")])
    try:
        doc = json.loads(text, parse_constant=_NonFinite, parse_int=_parse_int)
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
        with p.open("rb") as fh:  # read at most one byte past the limit: a FIFO or /dev/zero has no size
            data = fh.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        raise CommandError(f"{p}: no such file; pass the path of a pipeline spec (JSON)") from None
    except IsADirectoryError:
        raise CommandError(f"{p}: is a directory; pass the path of a pipeline spec (JSON)") from None
    except PermissionError:
        raise CommandError(f"{p}: permission denied") from None
    if len(data) > MAX_SPEC_BYTES:
        raise CommandError(f"{p}: larger than the {MAX_SPEC_BYTES // (1024 * 1024)} MB limit for a pipeline spec "
                           f"(MAX_SPEC_BYTES in core/load.py); a spec with 10,000 nodes is about 2 MB")
    return spec_from_json(data, source=str(p))


def _location(loc: tuple[Any, ...], doc: dict[str, Any]) -> tuple[str, str | None]:
    """Turn pydantic's ``('model', 'nodes', 3, 'op')`` into ``model.nodes[conv1].op`` and the node id.

    A block is named by its name (``model.blocks[basic_block].nodes[conv1]``); a node inside a block
    is not a node of the graph, so it gives no node id."""
    parts: list[str] = []
    node_id: str | None = None
    cursor: Any = doc
    in_block = False
    for i, key in enumerate(loc):
        if isinstance(key, int):
            label = str(key)
            if isinstance(cursor, list) and 0 <= key < len(cursor):
                item = cursor[key]
                name_key = {"nodes": "id", "blocks": "name"}.get(loc[i - 1] if i else "")
                if name_key and isinstance(item, dict) and isinstance(item.get(name_key), str):
                    label = json.dumps(item[name_key], ensure_ascii=True)[1:-1]
                    if name_key == "id" and not in_block:
                        node_id = item["id"]
                in_block = in_block or loc[i - 1:i] == ("blocks",)
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
        elif kind == "string_pattern_mismatch" and (err.get("ctx") or {}).get("pattern") == BLOCK_NAME_PATTERN:
            fix = "use letters, digits and '_' only, not starting with a digit (at most 64): it names a class"
        elif kind == "string_pattern_mismatch":
            fix = "use letters, digits, '_', '.' and '-' only (at most 64, not starting with '.' or '-')"
        problems.append(Problem(location, message, node=node_id,
                                received=None if received is None else _short_repr(received), fix=fix))
    return problems


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
