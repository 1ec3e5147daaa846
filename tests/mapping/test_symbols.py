"""Symbols (core/mapping/symbols.py): a block class's arguments while its layers are written. They
behave as one use's values, survive only exact arithmetic, and cannot be forged by user text."""

from __future__ import annotations

import pytest

from core.mapping.base import literal
from core.mapping.symbols import NAME_OPEN, Sym, keys_in, resolve, symbol


def test_a_symbol_is_its_value_and_survives_only_exact_arithmetic() -> None:
    c = Sym(64, ("param:channels",))
    assert c == 64 and c > 3 and hash(c) == hash(64) and (c, c) == (64, 64)
    fan_in = 3 * (c // 1) * 3
    assert isinstance(fan_in, Sym) and fan_in == 576 and (fan_in.keys, fan_in.coef) == (("param:channels",), 9)
    for plain in (c + 1, c - 1, c // 3, -c, c * 0.5, max(c, 65)):
        assert not isinstance(plain, Sym)
    assert isinstance(max(c, 3), Sym)  # max returns an operand: the symbol when it is the larger


def test_literal_writes_the_argument_and_resolve_names_it() -> None:
    fan_in = Sym(64, ("port:0:0",)) * 9
    code = f"f({literal(fan_in)}, {literal((symbol(2, 'param:stride'),) * 2)})"
    assert keys_in(code) == ["port:0:0", "param:stride", "param:stride"]
    names = {"port:0:0": "in_channels", "param:stride": "stride"}
    assert resolve(code, names.__getitem__) == "f(in_channels * 9, (stride, stride))"
    assert resolve(f"1 / {literal(fan_in)}", names.__getitem__) == "1 / (in_channels * 9)"
    assert resolve(f"self.a({literal(symbol(0.5, 'param:p'))})", lambda k: "self.p") == "self.a(self.p)"
    assert symbol(True, "param:bias") is True  # a bool cannot stand for an argument


@pytest.mark.parametrize("text", [f"{NAME_OPEN}param:x\ue001", "\ue002a\ue003"])
def test_user_text_cannot_forge_a_symbol(text: str) -> None:
    """repr escapes the private-use characters that mark symbols, so a string literal holds none."""
    assert keys_in(literal(text)) == [] and resolve(literal(text), lambda k: "HIJACKED") == literal(text)
