"""Generating tokens from a language model, one at a time: the loop ``flowtrain sample`` runs with any engine.

The model reads exactly ``block_size`` ids (its position table is that long), so each step puts the
context at positions 0 … L−1, pads the rest with id 0 and reads the scores at position L−1: with causal
attention the padding after it changes nothing before it (no key/value cache). A context longer than
``block_size`` keeps its last ``block_size`` ids (nanoGPT's crop). The next id is the highest score
(greedy, ``temperature`` 0) or drawn from softmax(scores / temperature), restricted to the ``top_k``
highest first, with numpy's Generator seeded by ``seed``: the same request gives the same ids whichever
engine computes the scores (model.onnx on onnxruntime, or the run's own framework).

This module imports numpy only: the model worker (:mod:`core.model_worker`) runs the same loop inside
the framework's subprocess, so the model is loaded once however many tokens are asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

Scores = Callable[[np.ndarray], np.ndarray]  # (1, block_size) int64 ids -> (1, block_size, vocab) scores


@dataclass(frozen=True)
class Request:
    """What to generate: ``tokens`` ids after ``prompt``, greedy or sampled."""

    prompt: list[int]
    tokens: int
    block_size: int
    temperature: float = 0.0
    top_k: int | None = None
    seed: int = 0

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def window(context: Sequence[int], block_size: int) -> tuple[np.ndarray, int]:
    """The model's input for ``context`` (its last ``block_size`` ids, padded with 0) and the position
    whose scores predict the next id."""
    kept = list(context)[-block_size:]
    ids = np.zeros((1, block_size), np.int64)
    ids[0, :len(kept)] = kept
    return ids, len(kept) - 1


def next_id(scores: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """The next id from one position's ``scores`` (vocabulary long): greedy or sampled (module docstring)."""
    logits = np.asarray(scores, np.float64).reshape(-1)
    if temperature == 0:
        return int(np.argmax(logits))  # the first of equal scores
    if top_k is not None and top_k < len(logits):
        threshold = np.sort(logits)[-top_k]
        logits = np.where(logits >= threshold, logits, -np.inf)
    shifted = np.exp((logits - logits.max()) / temperature)
    return int(rng.choice(len(logits), p=shifted / shifted.sum()))


def generate(scores: Scores, request: Request) -> list[int]:
    """``request.tokens`` new ids after ``request.prompt``, each from the model's ``scores``."""
    rng = np.random.default_rng(request.seed)
    context = list(request.prompt)
    new: list[int] = []
    for _ in range(request.tokens):
        ids, position = window(context, request.block_size)
        out = np.asarray(scores(ids))
        token = next_id(out[0, position], request.temperature, request.top_k, rng)
        context.append(token)
        new.append(token)
    return new
