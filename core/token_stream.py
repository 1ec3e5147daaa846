"""Token streams for language modelling: one long 1-d array of token ids, read as windows of
``block_size + 1`` tokens (the model reads the first ``block_size``, predicts the last ``block_size``).

Three layouts, told apart by the file name (as nanoGPT keeps them):

- ``.npy``: a numpy array of integer token ids (memory-mapped, never loaded whole);
- ``.bin``: raw little-endian uint16 token ids, nanoGPT's ``train.bin``;
- anything else (``.txt``, ``.md`` …): text read at the byte level, each byte one token (vocabulary 256),
  so a text file needs no tokenizer and no conversion.

:func:`token_stream_problems` checks a file against ``block_size`` and ``vocab_size`` before any job;
the generated ``data.py`` repeats the checks when it opens the file (it may have changed since).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import numpy as np

from core.errors import Problem

BYTE_VOCAB = 256
CHUNK = 1 << 24  # tokens scanned at once for the largest id


def kind(source: str) -> str:
    """``npy``, ``bin`` or ``bytes``: how the file holds its token ids."""
    suffix = PurePosixPath(source).suffix.lower()
    return {".npy": "npy", ".bin": "bin"}.get(suffix, "bytes")


def open_tokens(path: str | Path) -> np.ndarray:
    """The file's token ids, memory-mapped; OSError/ValueError when it cannot be read as a stream."""
    how = kind(str(path))
    if how == "npy":
        tokens = np.load(path, mmap_mode="r", allow_pickle=False)
    else:
        tokens = np.memmap(path, dtype=np.uint16 if how == "bin" else np.uint8, mode="r")
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise ValueError(f"it holds a {tokens.dtype} array of shape {tokens.shape}, not a 1-d array of token ids")
    return tokens


def first_out_of_range(tokens: np.ndarray, vocab_size: int) -> tuple[int, int] | None:
    """(position, id) of the first token id outside 0 … vocab_size − 1, or None; scanned in chunks."""
    for start in range(0, len(tokens), CHUNK):
        chunk = np.asarray(tokens[start:start + CHUNK])
        bad = np.flatnonzero((chunk >= vocab_size) | (chunk < 0)) if chunk.dtype.kind == "i" else \
            np.flatnonzero(chunk >= vocab_size)
        if len(bad):
            return start + int(bad[0]), int(chunk[bad[0]])
    return None


def token_stream_problems(path: str | Path, block_size: int, vocab_size: int) -> list[Problem]:
    """What keeps ``path`` from training a language model of this block and vocabulary size; [] when fine."""
    try:
        tokens = open_tokens(path)
    except (OSError, ValueError) as exc:
        return [Problem("data.source", f"{path} cannot be read as a token stream: {exc}", received=str(path)[:300],
                        expected="a .npy array of token ids, a nanoGPT .bin (uint16) or a text file (bytes)",
                        fix="write the token ids with numpy.save, or point data.source at a text file")]
    if len(tokens) < block_size + 1:
        return [Problem("data.source", f"{path} holds {len(tokens):,} tokens: shorter than one block",
                        received=f"{len(tokens):,} tokens", expected=f"at least block_size + 1 = {block_size + 1:,}",
                        fix="use more text, or a smaller data.block_size")]
    bad = first_out_of_range(tokens, vocab_size)
    if bad is not None:
        return [Problem("data.vocab_size", f"{path} holds token id {bad[1]:,} at position {bad[0]:,}, outside the "
                        f"vocabulary", received=f"token id {bad[1]:,}", expected=f"ids 0 … {vocab_size - 1:,}",
                        fix=f"set data.vocab_size above {bad[1]:,} (and the model's Embedding and head with it), "
                            "or re-tokenize the data")]
    return []


def byte_tokens(text: bytes) -> np.ndarray:
    """Byte-level tokenization: each byte is a token id 0 … 255 (what a text source is read as)."""
    return np.frombuffer(text, dtype=np.uint8).astype(np.uint16)
