"""Limits on what one user can make the portal do at once, and how much it hands out in one go.

- :data:`GATE`: at most one task of a kind per user at a time (an equivalence check runs three
  frameworks for minutes; a probe runs every environment's interpreter or reads a data file;
  generating example data writes hundreds of files),
  across all of that user's sessions in this portal process. A second request is answered at once
  with :class:`Busy`, never queued. Some kinds also have a cap over all users (:data:`AT_ONCE`):
  at most that many ONNX imports run in the portal at a time, whoever asks.
- :data:`ONNX_FOLD`: what folding one uploaded model's constants may cost (the keywords of
  :class:`core.onnx_import.FoldBudget`; an upload holds at most :data:`MAX_ONNX_UPLOAD_MB` of weights, so
  a few hundred MB of folded constants is generous; the command line's default budget is larger); the
  import runs in a subprocess limited to :data:`ONNX_IMPORT_MEMORY_BYTES` of address space and
  :data:`ONNX_IMPORT_TIMEOUT_S` seconds (:mod:`core.onnx_import.bounded`).
- :data:`MAX_UPLOAD_MB`: a spec upload (the server refuses bigger requests: ``--server.maxUploadSize``
  in scripts/portal.sh and ``.streamlit/config.toml``; the import checks again).
- :data:`MAX_ONNX_UPLOAD_MB`: an ONNX model uploaded to the editor's Import ONNX (checked before it is
  read); it cannot exceed the server's limit, so larger models are imported with ``import-onnx``.
- :data:`MAX_DOWNLOAD_BYTES`: Streamlit's download button holds a file in the portal's memory while
  it is served (Streamlit 1.67 converts every download to bytes, a deferred callable's result
  included: nothing is streamed), so files and zips larger than this are not offered in the browser;
  the page shows each one's size and the ``python -m flowtrain fetch RUN PATH`` command that copies
  it in pieces instead.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from core.errors import FlowTrainError
from core.load import MAX_SPEC_BYTES

MAX_UPLOAD_MB = MAX_SPEC_BYTES // (1024 * 1024)
MAX_ONNX_UPLOAD_MB = MAX_UPLOAD_MB  # the server's limit (scripts/portal.sh, .streamlit/config.toml)
MAX_ONNX_UPLOAD_BYTES = MAX_ONNX_UPLOAD_MB * 1024 * 1024
MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024

KIND_WORDS = {"equivalence": "An equivalence check", "probe": "A probe", "example_data": "An example-data generation",
              "onnx_import": "An ONNX import"}
AT_ONCE = {"onnx_import": 2}  # kind → the most running at a time in this portal, all users together
ONNX_FOLD = {"max_elements": 2**25, "max_total_bytes": 2**29, "max_seconds": 30.0, "max_macs": 2**31}
ONNX_IMPORT_MEMORY_BYTES = 2 * 2**30  # the import's subprocess: its address space (RLIMIT_AS)
ONNX_IMPORT_TIMEOUT_S = 120.0


class Busy(FlowTrainError):
    """The user already has a task of this kind running."""


class Gate:
    """One task per (kind, user) at a time, and at most ``at_once[kind]`` of a kind over all users, in
    this process. Thread-safe (every session shares it)."""

    def __init__(self, at_once: dict[str, int] | None = None) -> None:
        self._busy: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._at_once = dict(at_once or {})

    def busy(self, kind: str, user: str) -> bool:
        with self._lock:
            return (kind, user) in self._busy

    @contextlib.contextmanager
    def hold(self, kind: str, user: str) -> Iterator[None]:
        """Run the ``with`` body as the user's one task of ``kind``; :class:`Busy` if one is running."""
        with self._lock:
            if (kind, user) in self._busy:
                what = KIND_WORDS.get(kind, f"A {kind}")
                raise Busy(f"{what} of yours is already running (in this or another tab); wait for it to "
                           "finish, then try again")
            cap = self._at_once.get(kind)
            if cap is not None and sum(k == kind for k, _ in self._busy) >= cap:
                what = KIND_WORDS.get(kind, f"A {kind}")
                raise Busy(f"{what} is refused for now: {cap} are running in the portal (the most at once, all "
                           "users together); try again in a minute")
            self._busy.add((kind, user))
        try:
            yield
        finally:
            with self._lock:
                self._busy.discard((kind, user))


GATE = Gate(AT_ONCE)
