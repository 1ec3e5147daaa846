"""The data layer's preprocessing and augmentation steps as forms: each step kind's fields, read
from the spec's own step models, and the text a field shows and accepts."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Literal

StepKind = Literal["bool", "int", "float", "str", "ints", "floats", "strs"]


@dataclass(frozen=True)
class StepField:
    """One field of a preprocessing or augmentation step, as the data layer's form shows it."""

    name: str
    kind: StepKind
    default: Any
    optional: bool  # an empty entry means None
    help: str = ""


STEP_STARTERS: dict[str, dict[str, Any]] = {"resize": {"size": [28, 28]}, "one_hot": {"columns": []}}


def _step_union(which: Literal["preprocessing", "augmentation"]) -> tuple[type, ...]:
    import typing

    from core.spec import Augmentation, Preprocessing

    annotated = Preprocessing if which == "preprocessing" else Augmentation
    return typing.get_args(typing.get_args(annotated)[0])


def step_catalogue(which: Literal["preprocessing", "augmentation"]) -> dict[str, tuple[str, list[StepField]]]:
    """``op -> (description, fields)`` for every step kind the spec accepts in that list."""
    from pydantic_core import PydanticUndefined

    out: dict[str, tuple[str, list[StepField]]] = {}
    for cls in _step_union(which):
        op = cls.model_fields["op"].default
        fields = []
        for name, info in cls.model_fields.items():
            if name == "op":
                continue
            kind, optional = _classify(info.annotation)
            default = None if info.default is PydanticUndefined else info.default
            fields.append(StepField(name, kind, default, optional, info.description or ""))
        out[op] = ((cls.__doc__ or "").strip(), fields)
    return out


def _classify(ann: Any) -> tuple[StepKind, bool]:
    """A step field's annotation → (form kind, whether None is accepted)."""
    import types
    import typing

    optional = False
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            ann = typing.get_args(ann)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(ann))
            ann = args[0]
        else:
            break
    if origin in (list, tuple):
        elem = typing.get_args(ann)[0]
        while typing.get_origin(elem) is typing.Annotated:
            elem = typing.get_args(elem)[0]
        return ({int: "ints", float: "floats"}.get(elem, "strs"), optional)  # type: ignore[return-value]
    return ({bool: "bool", int: "int", float: "float"}.get(ann, "str"), optional)  # type: ignore[return-value]


def new_step(which: Literal["preprocessing", "augmentation"], op: str) -> dict[str, Any]:
    _doc, fields = step_catalogue(which)[op]
    step: dict[str, Any] = {"op": op}
    for f in fields:
        step[f.name] = copy.deepcopy(STEP_STARTERS.get(op, {}).get(f.name, f.default))
    return step


def format_step_value(field_: StepField, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def parse_step_value(field_: StepField, text: str) -> Any:
    """Text of a list-like or optional step field → value; ValueError naming the field otherwise."""
    text = text.strip()
    if not text:
        if field_.optional:
            return None
        if field_.kind in ("strs", "ints", "floats"):
            return []
        raise ValueError(f"{field_.name} needs a value")
    if field_.kind == "strs":
        return [p.strip() for p in text.split(",") if p.strip()]
    parts = [p for p in re.split(r"[,\s]+", text.strip("[]() ")) if p]
    try:
        if field_.kind == "ints":
            return [int(p) for p in parts]
        if field_.kind == "floats":
            return [float(p) for p in parts]
        if field_.kind == "float":
            return float(text)
        if field_.kind == "int":
            return int(text)
    except ValueError:
        raise ValueError(f"{field_.name}: {text!r} is not a list of {field_.kind}") from None
    return text
