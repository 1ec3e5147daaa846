"""Values that stand for a block class's constructor arguments while its layers are written.

A block's class is written once from the block's definition (:mod:`core.mapping.block_classes`):
its inner nodes go through the ordinary converters with every value bound to a block parameter
(``{"param": "channels"}``) — and every size of an input port — replaced by a *symbol*: a value
that behaves as the number (or string) it holds for one use, so the converters compute and
branch exactly as for that use, and that :func:`core.mapping.base.literal` writes as the
argument's name instead of the number.

Symbols survive only what is exact for every use: passing a value on unchanged (a shape inferred
as "the input's channels"), multiplying by a whole number (a fan-in, ``channels * 9``) and an
exact division (``channels // 1``). Any other arithmetic gives a plain number, which is then
written as a literal; the class is shared only by uses whose code is then the same text
(:func:`core.mapping.block_classes.map_graph` compares it), so a number that differs between uses
can never hide behind a shared class.

A symbol is written as its key between private-use characters (``\\ue000param:channels\\ue001``):
``repr`` escapes those characters, so no string literal a user typed can contain one, and
:func:`resolve` turns every marker into the argument's name (``self.<name>`` in a forward pass).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

NAME_OPEN, NAME_CLOSE = "\ue000", "\ue001"  # around a symbol's key
GROUP_OPEN, GROUP_CLOSE = "\ue002", "\ue003"  # around a product, parenthesised where it needs it
_NAME = re.compile(f"{NAME_OPEN}([^{NAME_CLOSE}]*){NAME_CLOSE}")
_GROUP = re.compile(f"{GROUP_OPEN}([^{GROUP_OPEN}{GROUP_CLOSE}]*){GROUP_CLOSE}")


class Sym(int):
    """An int that is ``coef`` times the product of the arguments ``keys`` (for one use: its value)."""

    keys: tuple[str, ...]
    coef: int

    def __new__(cls, value: int, keys: tuple[str, ...], coef: int = 1) -> Sym:
        obj = super().__new__(cls, value)
        obj.keys, obj.coef = keys, coef
        return obj

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, Sym):
            return Sym(int(self) * int(other), self.keys + other.keys, self.coef * other.coef)
        if isinstance(other, int) and not isinstance(other, bool):
            return Sym(int(self) * other, self.keys, self.coef * other) if other else 0
        return int(self) * other

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, Sym)) and other > 0 and self.coef % other == 0:
            return Sym(int(self) // other, self.keys, self.coef // other)
        return int(self) // other

    def code(self) -> str:
        parts = [f"{NAME_OPEN}{k}{NAME_CLOSE}" for k in self.keys] + ([str(self.coef)] if self.coef != 1 else [])
        return parts[0] if len(parts) == 1 else GROUP_OPEN + " * ".join(parts) + GROUP_CLOSE


class SymFloat(float):
    """A float argument (written as its name; arithmetic gives plain floats)."""

    key: str

    def __new__(cls, value: float, key: str) -> SymFloat:
        obj = super().__new__(cls, value)
        obj.key = key
        return obj

    def code(self) -> str:
        return f"{NAME_OPEN}{self.key}{NAME_CLOSE}"


class SymStr(str):
    """A string argument (written as its name; string methods give plain strings)."""

    key: str

    def __new__(cls, value: str, key: str) -> SymStr:
        obj = super().__new__(cls, value)
        obj.key = key
        return obj

    def code(self) -> str:
        return f"{NAME_OPEN}{self.key}{NAME_CLOSE}"


Symbol = Sym | SymFloat | SymStr


def symbol(value: Any, key: str) -> Any:
    """``value`` as the symbol ``key`` where a symbol can hold it (int, float, str), else ``value``."""
    if isinstance(value, bool):
        return value  # bool cannot be subclassed: a bound flag stays the use's value
    if isinstance(value, int):
        return Sym(value, (key,))
    if isinstance(value, float):
        return SymFloat(value, key)
    if isinstance(value, str):
        return SymStr(value, key)
    return value


def keys_in(code: str | None) -> list[str]:
    """The symbols' keys a piece of written code refers to, in order of appearance."""
    return _NAME.findall(code or "")


def resolve(code: str, name: Callable[[str], str]) -> str:
    """``code`` with every symbol written as ``name(key)`` and products parenthesised unless they
    stand alone as an argument or a value (``f(channels * 9)``, ``(a * 2, b)``)."""

    def group(m: re.Match[str]) -> str:
        before = m.string[:m.start()].rstrip()
        after = m.string[m.end():].lstrip()
        alone = before[-1:] in ("(", ",", "[", "=") and after[:1] in (")", ",", "]")
        return m[1] if alone else f"({m[1]})"

    while _GROUP.search(code):
        code = _GROUP.sub(group, code)
    code = _NAME.sub(lambda m: name(m[1]), code)
    if any(c in code for c in (NAME_OPEN, NAME_CLOSE, GROUP_OPEN, GROUP_CLOSE)):
        raise ValueError(f"a symbol was left unresolved in {code!r}")
    return code


def rename(value: Any, renames: Mapping[str, tuple[tuple[str, ...], int]]) -> Any:
    """A shape's symbols with port sizes replaced by what they were found to equal (see block_classes)."""
    if isinstance(value, Sym):
        keys: tuple[str, ...] = ()
        coef = value.coef
        for k in value.keys:
            sub_keys, sub_coef = renames.get(k, ((k,), 1))
            keys, coef = keys + sub_keys, coef * sub_coef
        return Sym(int(value), keys, coef)
    if isinstance(value, tuple):
        return tuple(rename(v, renames) for v in value)
    return value
