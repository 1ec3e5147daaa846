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
from core.ops.registry import ParamError
from portal.data_steps import StepField, format_step_value, parse_step_value
from portal.editor_state import Editor, format_param, parse_param

PARAM_PREFIX = "param."
FIELD_PREFIXES = ("data.", "training.", "meta.", "step.")
VERSION_MARK = "@"


def wkey(ed: Editor, base: str) -> str:
    """The key of the widget that shows ``base`` (a field, parameter or step) of the current document."""
    return f"{base}{VERSION_MARK}{ed.form_version}"


def shown_value(ed: Editor, key: str) -> Any:
    """The value of the widget ``key`` when it shows the current document, else ``STALE``.

    The browser sends a value typed but not yet confirmed together with the click that follows it
    (e.g. "Load template"), and Streamlit runs the click's callback first: the field's own callback
    then belongs to a document that is gone, and must not write into its replacement."""
    if not key.endswith(f"{VERSION_MARK}{ed.form_version}") or key not in st.session_state:
        return STALE
    return st.session_state[key]


STALE = object()


# --------------------------------------------------------------------------- refusals

# Number widgets get no min/max: the browser would refuse a value outside them without a word (a red
# border, the number kept in the field, the document unchanged). Python checks the range instead and
# says why next to the field; the field then shows the value the document kept.
JS_SAFE_INT = 2**53 - 1  # larger integers do not survive the browser's numbers


def _num(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return _num(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def _in_range(value: float, low: float | None, high: float | None, what: str) -> None:
    """ValueError naming the range when ``value`` is outside [low, high] (or beyond JS integers)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{_shown(value)} is not a finite number")
    if isinstance(value, int) and abs(value) > JS_SAFE_INT:
        high = JS_SAFE_INT if high is None else min(high, JS_SAFE_INT)
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            rng = f"from {_num(low)} to {_num(high)}"
        elif low is not None:
            rng = f"of at least {_num(low)}"
        else:
            rng = f"of at most {_num(high)}"  # type: ignore[arg-type]
        raise ValueError(f"{_shown(value)} is out of range: expected {what} {rng}")


def field_messages(ed: Editor, name: str, location: str | None, where: Any = None) -> None:
    """Under a field: why a value typed into it was refused, and the document's problems at it."""
    where = where or st
    refused = ed.field_errors.get(name)
    if refused:
        where.error(refused, icon=":material/block:")
    if location:
        for p in ed.problems():
            if p.location == location:
                where.error(str(p).replace("`", "'"))


# --------------------------------------------------------------------------- op parameters (side form)


def _on_param(ed: Editor, node_id: str, prm: Param, key: str) -> None:
    value = shown_value(ed, key)
    if value is STALE or not ed.has_node(node_id):
        return
    name = f"{PARAM_PREFIX}{node_id}.{prm.name}"
    try:
        if prm.kind in ("int_pair", "padding", "shape", "ints") or (prm.optional and prm.kind in ("int", "float")):
            value = parse_param(prm, str(value))
        elif prm.kind == "node":  # a node id (a tied head's Embedding); empty clears it
            value = str(value).strip() or None
        elif prm.kind == "int":
            value = int(value)
            _in_range(value, prm.minimum, prm.maximum, "an integer")
        elif prm.kind == "float":
            value = float(value)
            _in_range(value, prm.minimum, prm.maximum, "a number")
        if value is not None:
            prm.check(value)  # the validator's own check: refused here, said here
    except ParamError as err:
        ed.refuse_field(name, f"{prm.name}: {_shown(value)} {err.message}; expected {err.expected}. "
                              f"The node keeps {_shown(_current_param(ed, node_id, prm))}.")
        return
    except ValueError as err:
        ed.refuse_field(name, f"{prm.name}: {err}. The node keeps {_shown(_current_param(ed, node_id, prm))}.")
        return
    ed.accept_field(name)
    ed.set_param(node_id, prm.name, value)


def _current_param(ed: Editor, node_id: str, prm: Param) -> Any:
    params = ed.node(node_id)["data"].get("params") or {}
    return params.get(prm.name, None if prm.required else prm.default)


def param_widget(ed: Editor, node_id: str, prm: Param, value: Any) -> None:
    """One widget for one declared parameter, with the declaration's help text and range."""
    name = f"{PARAM_PREFIX}{node_id}.{prm.name}"
    key = wkey(ed, name)
    label = prm.name
    help_text = (f"{prm.help} " if prm.help else "") + f"Expected: {prm.describe()}." + \
        (" Required." if prm.required else "")
    kw: dict[str, Any] = {"key": key, "help": help_text, "on_change": _on_param, "args": (ed, node_id, prm, key)}
    if prm.kind == "bool" and isinstance(value, bool):
        st.checkbox(label, value=value, **kw)
    elif prm.kind == "choice" and value in prm.choices:
        st.selectbox(label, options=list(prm.choices), index=list(prm.choices).index(value), **kw)
    elif prm.kind == "int" and not prm.optional and isinstance(value, int) and not isinstance(value, bool) \
            and abs(value) <= JS_SAFE_INT:
        st.number_input(label, value=value, step=1, **kw)
    elif prm.kind == "float" and not prm.optional and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value):
        st.number_input(label, value=float(value), step=_float_step(float(value)), format="%g", **kw)
    else:  # list-like kinds, optional values, or a value of the wrong type (from an imported file)
        text = format_param(prm, value) if not isinstance(value, str) or prm.kind == "padding" else value
        st.text_input(label, value=text, placeholder=_placeholder(prm), **kw)
    field_messages(ed, name, None)


def _float_step(value: float) -> float:
    if value == 0:
        return 0.01
    return float(10 ** math.floor(math.log10(abs(value))))


def _placeholder(prm: Param) -> str:
    return {"int_pair": "3  or  3, 5", "padding": "1, [1, 2], same or valid", "shape": "e.g. 1, 28, 28",
            "ints": "e.g. 1, 2", "node": "a node id, e.g. wte"}.get(prm.kind, "empty = default" if not prm.required else "")


# --------------------------------------------------------------------------- spec fields (data and training layers)

Section = Literal["data", "training", "meta"]


def _get(doc: dict[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)  # type: ignore[assignment]
    return doc


def _field_value(kind: str, raw: Any, low: float | None, high: float | None) -> Any:
    """The document value of a field's widget value; ValueError saying why it cannot be one."""
    if kind in ("optional_int", "optional_float"):
        text = str(raw).strip()
        if not text or (kind == "optional_int" and text == "0"):
            return None
        try:
            value: Any = int(float(text)) if kind == "optional_int" and float(text).is_integer() else float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number (leave it empty for none)") from None
        if kind == "optional_int" and not isinstance(value, int):
            raise ValueError(f"{text!r} is not a whole number")
        _in_range(value, low, high, "a whole number" if kind == "optional_int" else "a number")
        return value
    if kind == "ints":
        text = str(raw).strip()
        try:
            return [int(v) for v in text.replace("×", ",").replace(" ", ",").split(",") if v] or None
        except ValueError:
            raise ValueError(f"{text!r} is not a list of integers such as 1, 28, 28") from None
    if kind == "optional_str":
        return str(raw).strip() or None
    if kind == "int":
        value = int(raw)
        _in_range(value, low, high, "a whole number")
        return value
    if kind == "float":
        value = float(raw)
        _in_range(value, low, high, "a number")
        return value
    return raw


def _on_field(ed: Editor, section: Section, path: tuple[str, ...], key: str, kind: str, label: str,
              low: float | None, high: float | None) -> None:
    name = f"{section}.{'.'.join(path)}"
    raw = shown_value(ed, key)
    if raw is STALE:
        return
    try:
        value = _field_value(kind, raw, low, high)
    except ValueError as err:
        kept = _get(ed.doc if section == "meta" else ed.doc[section], path)
        ed.refuse_field(name, f"{label}: {err}. Kept {_shown(kept)}.")
        return
    ed.accept_field(name)
    ed.set_field(section, path, value)


def field_input(ed: Editor, section: Section, path: tuple[str, ...], label: str, kind: str = "int",
                help: str | None = None, options: Sequence[Any] | None = None,
                min_value: float | None = None, max_value: float | None = None,
                step: float | None = None, container: Any = None) -> Any:
    """A widget bound to ``doc[section][path...]``, with the reason for a refused value and the
    document's problems at this field right under it.

    kind: int | float | bool | str | select | optional_int (0 = none) | optional_float | optional_str | ints.
    ``min_value``/``max_value``: the accepted range, checked when a value is typed (not by the browser).
    """
    where = container or st
    doc = ed.doc if section == "meta" else ed.doc[section]
    value = _get(doc, path)
    name = f"{section}.{'.'.join(path)}"
    key = wkey(ed, name)
    low = min_value if min_value is not None else (0 if kind == "optional_int" else None)
    kw: dict[str, Any] = {"key": key, "help": help, "on_change": _on_field,
                          "args": (ed, section, path, key, kind, label, low, max_value)}
    if kind == "select":
        opts = list(options or [])
        if value not in opts:
            opts.append(value)
        widget = where.selectbox(label, options=opts, index=opts.index(value), **kw)
    elif kind == "bool":
        widget = where.checkbox(label, value=bool(value), **kw)
    elif kind == "int" and isinstance(value, int) and not isinstance(value, bool) and abs(value) <= JS_SAFE_INT:
        widget = where.number_input(label, value=value, step=int(step or 1), **kw)
    elif kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        widget = where.number_input(label, value=float(value), step=float(step or _float_step(float(value))),
                                    format="%g", **kw)
    elif kind == "optional_int" and (value is None or (isinstance(value, int) and not isinstance(value, bool)
                                                       and abs(value) <= JS_SAFE_INT)):
        widget = where.number_input(label, value=int(value or 0), step=int(step or 1), **kw)
    elif kind == "ints":
        text = ", ".join(str(v) for v in value) if isinstance(value, list) else ""
        widget = where.text_input(label, value=text, **kw)
    else:
        widget = where.text_input(label, value="" if value is None else str(value), **kw)
    field_messages(ed, name, ".".join(path) if section == "meta" else name, where)
    return widget


# --------------------------------------------------------------------------- data-layer steps


def _on_step(ed: Editor, which: Literal["preprocessing", "augmentation"], index: int, field_: StepField,
             key: str) -> None:
    value = shown_value(ed, key)
    if value is STALE or index >= len(ed.doc["data"].get(which) or []):
        return
    name = f"step.{which}.{index}.{field_.name}"
    if field_.kind in ("ints", "floats", "strs") or field_.optional or field_.kind == "str":
        try:
            value = parse_step_value(field_, str(value))
        except ValueError as err:
            kept = ed.doc["data"][which][index].get(field_.name)
            ed.refuse_field(name, f"{which} step {index + 1}: {err}. Kept {_shown(kept)}.")
            return
    ed.accept_field(name)
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
            and not isinstance(value, bool) and math.isfinite(value):
        st.number_input(field_.name, value=float(value), step=_float_step(float(value)), format="%g", **kw)
    else:
        placeholder = "empty = computed from the data" if field_.optional else ""
        st.text_input(field_.name, value=format_step_value(field_, value), placeholder=placeholder, **kw)
    field_messages(ed, f"step.{which}.{index}.{field_.name}", f"data.{which}[{index}].{field_.name}")
