"""Widgets generated from declarations: an op's parameters (the side form), spec fields, data steps.

Every widget takes its initial value from the editor's document; changes go back through
``on_change`` callbacks (which run before the script, so the page is drawn from the updated
document). The document is the one source of truth: a widget's key is its field's name plus the
editor's form version (:func:`wkey`), and whatever replaces the document other than through the
widget itself (template, import, undo, a run's spec, a data probe) raises that version
(:meth:`Editor.refresh_forms`), so every form is drawn by new widgets showing the new document.
Forgetting the old widget values is not enough: the browser keeps the value of a widget whose key
it still knows, shows it, and sends it back with the next interaction, which writes it into the
document.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import streamlit as st

from core.ops import Param
from portal.editor_state import Editor, StepField, format_param, format_step_value, parse_param, parse_step_value

PARAM_PREFIX = "param."
FIELD_PREFIXES = ("data.", "training.", "meta.", "step.")
VERSION_MARK = "@"


def wkey(ed: Editor, base: str) -> str:
    """The key of the widget that shows ``base`` (a field, parameter or step) of the current document."""
    return f"{base}{VERSION_MARK}{ed.form_version}"


# --------------------------------------------------------------------------- op parameters (side form)


def _on_param(ed: Editor, node_id: str, prm: Param, key: str) -> None:
    value = st.session_state[key]
    if prm.kind in ("int_pair", "padding", "shape", "ints") or (prm.optional and prm.kind in ("int", "float")):
        try:
            value = parse_param(prm, str(value))
        except ValueError as err:
            ed.notice("error", f"{node_id}: {err}")
            return
    elif prm.kind == "int":
        value = int(value)
    elif prm.kind == "float":
        value = float(value)
    ed.set_param(node_id, prm.name, value)


def param_widget(ed: Editor, node_id: str, prm: Param, value: Any) -> None:
    """One widget for one declared parameter, with the declaration's help text and range."""
    key = wkey(ed, f"{PARAM_PREFIX}{node_id}.{prm.name}")
    label = prm.name
    help_text = (f"{prm.help} " if prm.help else "") + f"Expected: {prm.describe()}." + \
        (" Required." if prm.required else "")
    kw: dict[str, Any] = {"key": key, "help": help_text, "on_change": _on_param, "args": (ed, node_id, prm, key)}
    if prm.kind == "bool" and isinstance(value, bool):
        st.checkbox(label, value=value, **kw)
    elif prm.kind == "choice" and value in prm.choices:
        st.selectbox(label, options=list(prm.choices), index=list(prm.choices).index(value), **kw)
    elif prm.kind == "int" and not prm.optional and isinstance(value, int) and not isinstance(value, bool):
        st.number_input(label, value=value, step=1, **_bounds(prm, value, int), **kw)
    elif prm.kind == "float" and not prm.optional and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value):
        st.number_input(label, value=float(value), step=_float_step(float(value)), format="%g",
                        **_bounds(prm, value, float), **kw)
    else:  # list-like kinds, optional values, or a value of the wrong type (from an imported file)
        text = format_param(prm, value) if not isinstance(value, str) or prm.kind == "padding" else value
        st.text_input(label, value=text, placeholder=_placeholder(prm), **kw)


def _bounds(prm: Param, value: float, cast: type) -> dict[str, Any]:
    """min/max for a number input, only when the current value is inside them (else Streamlit raises)."""
    out: dict[str, Any] = {}
    if prm.minimum is not None and value >= prm.minimum:
        out["min_value"] = cast(prm.minimum)
    if prm.maximum is not None and value <= prm.maximum:
        out["max_value"] = cast(prm.maximum)
    return out


def _float_step(value: float) -> float:
    if value == 0:
        return 0.01
    return float(10 ** math.floor(math.log10(abs(value))))


def _placeholder(prm: Param) -> str:
    return {"int_pair": "3  or  3, 5", "padding": "1, [1, 2], same or valid", "shape": "e.g. 1, 28, 28",
            "ints": "e.g. 1, 2"}.get(prm.kind, "empty = default" if not prm.required else "")


# --------------------------------------------------------------------------- spec fields (data and training layers)

Section = Literal["data", "training", "meta"]


def _get(doc: dict[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)  # type: ignore[assignment]
    return doc


def _area(section: Section) -> str:
    return "toolbar" if section == "meta" else section


def _on_field(ed: Editor, section: Section, path: tuple[str, ...], key: str, kind: str) -> None:
    value = st.session_state[key]
    if kind == "optional_int":
        value = int(value) if value else None
    elif kind == "optional_float":
        text = str(value).strip()
        if not text:
            value = None
        else:
            try:
                value = float(text)
            except ValueError:
                ed.notice("error", f"{'.'.join(path)}: {text!r} is not a number (leave it empty for none)",
                          _area(section))
                return
    elif kind == "ints":
        text = str(value).strip()
        try:
            value = [int(v) for v in text.replace("×", ",").replace(" ", ",").split(",") if v] or None
        except ValueError:
            ed.notice("error", f"{'.'.join(path)}: {text!r} is not a list of integers such as 1, 28, 28",
                      _area(section))
            return
    elif kind == "optional_str":
        value = str(value).strip() or None
    elif kind == "int":
        value = int(value)
    elif kind == "float":
        value = float(value)
    ed.set_field(section, path, value)


def field_input(ed: Editor, section: Section, path: tuple[str, ...], label: str, kind: str = "int",
                help: str | None = None, options: Sequence[Any] | None = None,
                min_value: float | None = None, max_value: float | None = None,
                step: float | None = None, container: Any = None) -> Any:
    """A widget bound to ``doc[section][path...]``.

    kind: int | float | bool | str | select | optional_int (0 = none) | optional_float | optional_str | ints.
    """
    where = container or st
    doc = ed.doc if section == "meta" else ed.doc[section]
    value = _get(doc, path)
    key = wkey(ed, f"{section}.{'.'.join(path)}")
    kw: dict[str, Any] = {"key": key, "help": help, "on_change": _on_field, "args": (ed, section, path, key, kind)}
    if kind == "select":
        opts = list(options or [])
        if value not in opts:
            opts.append(value)
        return where.selectbox(label, options=opts, index=opts.index(value), **kw)
    if kind == "bool":
        return where.checkbox(label, value=bool(value), **kw)
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        rng = {k: int(v) for k, v in (("min_value", min_value), ("max_value", max_value)) if v is not None}
        rng = {k: v for k, v in rng.items() if (k == "min_value" and value >= v) or (k == "max_value" and value <= v)}
        return where.number_input(label, value=value, step=int(step or 1), **rng, **kw)
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        rng = {k: float(v) for k, v in (("min_value", min_value), ("max_value", max_value)) if v is not None}
        rng = {k: v for k, v in rng.items() if (k == "min_value" and value >= v) or (k == "max_value" and value <= v)}
        return where.number_input(label, value=float(value), step=float(step or _float_step(float(value))),
                                  format="%g", **rng, **kw)
    if kind == "optional_int":
        shown = int(value) if isinstance(value, int) and not isinstance(value, bool) else 0
        return where.number_input(label, value=shown, min_value=0, step=int(step or 1), **kw)
    if kind == "ints":
        text = ", ".join(str(v) for v in value) if isinstance(value, list) else ""
        return where.text_input(label, value=text, **kw)
    text = "" if value is None else str(value)
    return where.text_input(label, value=text, **kw)


# --------------------------------------------------------------------------- data-layer steps


def _on_step(ed: Editor, which: Literal["preprocessing", "augmentation"], index: int, field_: StepField,
             key: str) -> None:
    value = st.session_state[key]
    if field_.kind in ("ints", "floats", "strs") or field_.optional or field_.kind == "str":
        try:
            value = parse_step_value(field_, str(value))
        except ValueError as err:
            ed.notice("error", f"data.{which}[{index}].{err}", "data")
            return
    steps = [dict(s) for s in ed.doc["data"].get(which) or []]
    steps[index][field_.name] = value
    ed.set_list(which, steps)


def step_field_widget(ed: Editor, which: Literal["preprocessing", "augmentation"], index: int, step: dict[str, Any],
                      field_: StepField) -> None:
    key = wkey(ed, f"step.{which}.{index}.{step.get('op')}.{field_.name}")
    value = step.get(field_.name, field_.default)
    kw: dict[str, Any] = {"key": key, "on_change": _on_step, "args": (ed, which, index, field_, key),
                          "help": field_.help or None}
    if field_.kind == "bool" and isinstance(value, bool):
        st.checkbox(field_.name, value=value, **kw)
    elif field_.kind == "int" and not field_.optional and isinstance(value, int) and not isinstance(value, bool):
        st.number_input(field_.name, value=value, step=1, **kw)
    elif field_.kind == "float" and not field_.optional and isinstance(value, (int, float)) \
            and not isinstance(value, bool):
        st.number_input(field_.name, value=float(value), step=_float_step(float(value)), format="%g", **kw)
    else:
        placeholder = "empty = computed from the data" if field_.optional else ""
        st.text_input(field_.name, value=format_step_value(field_, value), placeholder=placeholder, **kw)
