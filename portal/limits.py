"""Limits on what one user can make the portal do at once, and how much it hands out in one go.

- :data:`GATE`: at most one task of a kind per user at a time (an equivalence check runs three
  frameworks for minutes; a probe runs every environment's interpreter or reads a data file;
  generating example data writes hundreds of files),
  across all of that user's sessions in this portal process. A second request is answered at once
  with :class:`Busy`, never queued. Some kinds also have a cap over all users (:data:`AT_ONCE`):
  at most that many ONNX imports run in the portal at a time, whoever asks.
- :data:`ONNX_FOLD`: what folding one uploaded model's constants may cost (the keywords of
  :class:`core.onnx_import.FoldBudget`; a few hundred MB of folded constants is generous; the command
  line's default budget is larger); the import runs in a subprocess limited to
  :data:`ONNX_IMPORT_MEMORY_BYTES` of address space plus five times the model, and
  :data:`ONNX_IMPORT_TIMEOUT_S` seconds plus one per 5 MB of the model (:func:`onnx_import_bounds`,
  :mod:`core.onnx_import.bounded`).
- :data:`MAX_UPLOAD_MB`: a spec upload (its uploader refuses bigger files; the import checks again).
  An ONNX model may be larger: the site's ``[portal] max_onnx_upload_mb`` (default 2 GB), sent in pieces
  to the portal's own upload route and written to disk (:mod:`portal.upload_store`), never held in memory;
  larger models are imported with ``import-onnx``. Streamlit's own uploaders (which hold an upload in
  memory) are limited by the server to :data:`MAX_TRY_UPLOAD_MB` (``.streamlit/config.toml``).
- :data:`MAX_TRY_UPLOAD_MB`: the inputs of one "Try the model" on a run's page, all files together
  (a few images or arrays; ``python -m flowtrain predict`` takes inputs of any size, streamed).
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
MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024
MAX_TRY_UPLOAD_MB = 50

KIND_WORDS = {"equivalence": "An equivalence check", "probe": "A probe", "example_data": "An example-data generation",
              "onnx_import": "An ONNX import", "predict": "A prediction"}
AT_ONCE = {"onnx_import": 2}  # kind → the most running at a time in this portal, all users together
ONNX_FOLD = {"max_elements": 2**25, "max_total_bytes": 2**29, "max_seconds": 30.0, "max_macs": 2**31}
ONNX_IMPORT_MEMORY_BYTES = 2 * 2**30  # the import's subprocess: its address space (RLIMIT_AS)
ONNX_IMPORT_TIMEOUT_S = 120.0


def onnx_import_bounds(size: int) -> tuple[int, float]:
    """The address space and seconds an import of a ``size``-byte model may take. The subprocess holds the
    file's bytes, the parsed model, its arrays and the canonical weights at once: a 513 MB model needed
    between 2.5 and 3 GiB (4x the model was refused), and 44 s on a loaded 2-core machine."""
    return ONNX_IMPORT_MEMORY_BYTES + 5 * size, ONNX_IMPORT_TIMEOUT_S + size / (5 * 2**20)


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
