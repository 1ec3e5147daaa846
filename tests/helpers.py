"""Shared test helpers. Tests wait for things by polling with a deadline, never by a blind sleep."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
from pathlib import Path
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


def free_port() -> int:
    """A TCP port free on loopback right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Not the global generator: a test that seeds it would make two pytest-xdist workers try the same ports.
_PORTS = random.SystemRandom()


def free_port_pair() -> int:
    """A port p with p and p + 1 both free on loopback right now (two Keras workers' gRPC servers)."""
    for _ in range(200):
        base = _PORTS.randint(20_000, 60_000)
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", base))
                b.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
            return base
    raise AssertionError("no two consecutive free ports on loopback")


def empty_screenshots(folder: Path) -> None:
    """Delete the screenshots an earlier test session left in ``folder``: they must not pass for this one's."""
    for old in folder.glob("*.png"):
        old.unlink()
