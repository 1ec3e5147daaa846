"""Shared test helpers. Tests wait for things by polling with a deadline, never by a blind sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.2,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Call ``predicate`` until it returns something truthy; return that value.

    Raises ``AssertionError`` after ``timeout`` seconds, naming ``message`` (a string, or a callable
    evaluated at failure time so it can show the last observed state) and the last value seen.
    """
    deadline = time.monotonic() + timeout
    last: T = predicate()
    while not last:
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:g} s waiting for {text}; last value: {last!r}")
        time.sleep(interval)
        last = predicate()
    return last
