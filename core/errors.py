"""The project's own error types.

Every error a user can cause derives from :class:`FlowTrainError`; the CLI and
the portal print its message (never a traceback) and the CLI exits with
``exit_code``.
"""

from __future__ import annotations

from dataclasses import dataclass


class FlowTrainError(Exception):
    """Base of every user-facing error. ``str(err)`` is a complete message."""

    exit_code = 1


class CommandError(FlowTrainError):
    """Bad command-line usage or an input file that cannot be read."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Problem:
    """One problem in a pipeline spec.

    ``location`` is a dotted path such as ``model.nodes[conv1].params.kernel_size``
    or ``data.batch_size``; ``node`` is the node id when the problem belongs to one.
    """

    location: str
    message: str
    node: str | None = None
    received: str | None = None
    expected: str | None = None
    fix: str | None = None

    def __str__(self) -> str:
        parts = [f"{self.location}: {self.message}"]
        if self.received is not None:
            parts.append(f"received {self.received}")
        if self.expected is not None:
            parts.append(f"expected {self.expected}")
        text = "; ".join(parts)
        if self.fix:
            text += f". Fix: {self.fix}"
        return text

    def to_dict(self) -> dict[str, str | None]:
        return {
            "location": self.location,
            "node": self.node,
            "message": self.message,
            "received": self.received,
            "expected": self.expected,
            "fix": self.fix,
        }


class SpecError(FlowTrainError):
    """A spec that is invalid; carries every problem found, not only the first."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        lines = [f"{len(self.problems)} problem(s) in the pipeline spec:"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))

    @property
    def node_ids(self) -> list[str]:
        return sorted({p.node for p in self.problems if p.node is not None})
