"""The generation loop of ``flowtrain sample`` (core/sampling.py) on a scripted model: what it feeds the
model (the context cropped to the block, padded after it) and how it picks (greedy, top-k, seeded)."""

from __future__ import annotations

import numpy as np

from core.sampling import Request, generate, next_id, window

VOCAB = 5


def test_the_window_keeps_the_last_block_and_pads_after_it() -> None:
    ids, position = window([1, 2, 3], 5)
    assert ids.tolist() == [[1, 2, 3, 0, 0]] and ids.dtype == np.int64 and position == 2
    ids, position = window(list(range(1, 9)), 5)
    assert ids.tolist() == [[4, 5, 6, 7, 8]] and position == 4


def test_greedy_follows_the_scores_at_the_last_context_position() -> None:
    seen: list[list[int]] = []

    def scores(ids: np.ndarray) -> np.ndarray:  # predicts (id + 1) mod VOCAB at every position
        seen.append(ids[0].tolist())
        out = np.zeros((1, ids.shape[1], VOCAB), np.float32)
        out[0, np.arange(ids.shape[1]), (ids[0] + 1) % VOCAB] = 1.0
        return out

    assert generate(scores, Request(prompt=[3], tokens=4, block_size=3)) == [4, 0, 1, 2]
    assert seen == [[3, 0, 0], [3, 4, 0], [3, 4, 0], [4, 0, 1]]  # the last: cropped to the block


def test_top_k_and_the_seed_decide_the_draws() -> None:
    scores = np.array([0.0, 5.0, 4.0, -1.0, 3.0])
    rng = np.random.default_rng(0)
    assert next_id(scores, 0.0, None, rng) == 1
    assert {next_id(scores, 10.0, 2, rng) for _ in range(200)} == {1, 2}  # only the two best, both drawn
    draws = [next_id(scores, 1.0, None, np.random.default_rng(3)) for _ in range(2)]
    assert draws[0] == draws[1]
