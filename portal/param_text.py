"""Text for nodes and parameters: user-given text as literal Markdown on the canvas, the parameters a
node shows, and the side form's text for list-like parameter values."""

from __future__ import annotations

import copy
import re
from typing import Any

from core.ops import REGISTRY, Param
from portal.editor_blocks import bound_to


def md_text(text: str) -> str:
    """``text`` as literal Markdown text: every ASCII punctuation character backslash-escaped (which
    CommonMark allows for all of them), so no ``<tag>``, ``[link](…)``, ``![image](…)``, ``$math$``,
    emphasis or heading can come from it; line breaks become spaces. GFM also turns bare URLs and
    e-mail addresses into links *after* escapes are resolved: an invisible word joiner after every
    ``:`` and ``@`` and inside ``www.`` keeps them text."""
    text = re.sub(r"([:@])", "\\1" + WORD_JOINER, " ".join(text.split()))
    text = re.sub(r"(?i)(www)(\.)", r"\1" + WORD_JOINER + r"\2", text)
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


WORD_JOINER = "\u2060"


def param_summary(op: str, params: dict[str, Any], block: dict[str, Any] | None = None) -> str:
    """Up to three parameters, for the node: an op's required and changed ones; a block use's, each
    with its default filled in. A value bound to a block parameter shows as ``⟨name⟩``."""
    if block is not None:
        shown = [(p["name"], params.get(p["name"], p["default"])) for p in block["params"]]
    elif op in REGISTRY:
        shown = [(prm.name, params[prm.name]) for prm in REGISTRY.get(op).params
                 if prm.name in params and (prm.required or params[prm.name] != prm.default)]
    else:
        return ""
    parts = []
    for name, v in shown[:3]:
        text = f"⟨{bound_to(v)}⟩" if bound_to(v) else "×".join(str(x) for x in v) if isinstance(v, (list, tuple)) \
            else str(v)
        parts.append(f"{name}={md_text(text[:24])}")
    return " ".join(parts)


# --------------------------------------------------------------------------- parameter text


def format_param(prm: Param, value: Any) -> str:
    """A list-like parameter value as the text the side form shows (``1, 28, 28``; ``same``)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def parse_param(prm: Param, text: str) -> Any:
    """Parse the side form's text for list-like kinds (shape, ints, int_pair, padding).

    Returns the raw value (the validator normalises and range-checks it); raises ValueError with a
    message saying what was expected.
    """
    text = text.strip()
    if not text:
        if prm.optional:
            return None
        if not prm.required:
            return copy.deepcopy(prm.default)
        raise ValueError(f"{prm.name} is required: {prm.describe()}")
    if prm.kind == "padding" and text in ("same", "valid"):
        return text
    parts = [p for p in re.split(r"[,\s×x]+", text.strip("[]() ")) if p]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"{prm.name}: {text!r} is not {prm.describe()}") from None
    if prm.kind in ("int_pair", "padding"):
        if len(values) == 1:
            return values[0]
        if len(values) == 2:
            return values
        raise ValueError(f"{prm.name}: {text!r} has {len(values)} numbers; expected {prm.describe()}")
    return values
