"""Text for the terminal: what a file or a user wrote (an ONNX op type, a node name, a path) is printed
with its control characters made visible, so it cannot move the cursor, retitle the window, hide a
line or ring the bell (ANSI escape sequences start with ESC, \\x1b)."""

from __future__ import annotations

import unicodedata

KEPT = "\n\t"  # line structure of our own messages


def terminal_text(text: str) -> str:
    """``text`` with every control character but newline and tab written as ``\\xNN`` / ``\\uNNNN``
    (C0, DEL and C1 controls; Unicode format characters such as the bidirectional overrides too)."""
    return "".join(ch if ch in KEPT or unicodedata.category(ch) not in ("Cc", "Cf") else _visible(ch) for ch in text)


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
