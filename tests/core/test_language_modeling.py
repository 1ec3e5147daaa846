"""task: language_modeling: what the validator asks of a language model, the token stream checked before any
job (core.token_stream) and again by the generated data.py, and the windows data.py cuts from it. The
programs training gpt_mini: tests/frameworks/test_gpt.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import zoo
from core.example_data import write_example_data
from core.spec import PipelineSpec
from core.token_stream import token_stream_problems
from core.validate import analyse, validate
from tests.data.fixtures import load_data_module


def _gpt_mini(**data: Any) -> PipelineSpec:
    doc = zoo.template("gpt_mini").model_dump(mode="json")
    doc["data"].update(data)
    return PipelineSpec.model_validate(doc)


def _problems(spec: PipelineSpec) -> list[tuple[str, str]]:
    return [(p.location, p.message) for p in analyse(spec).problems]


def test_a_language_model_needs_its_block_and_vocabulary_size() -> None:
    problems = _problems(_gpt_mini(block_size=None, vocab_size=None))
    assert ("data.block_size", "is needed for language_modeling") in problems
    assert ("data.vocab_size", "is needed for language_modeling") in problems


def test_the_model_must_read_a_block_and_predict_the_vocabulary_at_every_position() -> None:
    problems = analyse(_gpt_mini(vocab_size=300)).problems  # the head still predicts 256 ids
    assert [(p.location, p.node, p.received, p.expected) for p in problems] == [
        ("model.nodes[output].inputs", "output", "64×256", "64×300 (block_size × vocab_size)")]


def test_a_language_model_trains_with_cross_entropy_on_a_token_stream() -> None:
    doc = _gpt_mini().model_dump(mode="json")
    doc["training"]["loss"] = "mse"
    doc["data"]["format"] = "csv"
    doc["data"]["preprocessing"] = [{"op": "standardize"}]
    problems = dict(_problems(PipelineSpec.model_validate(doc)))
    assert problems["training.loss"] == "mse cannot train a language model"
    assert problems["data.format"] == "a language model reads a token stream"
    assert problems["data.preprocessing[0]"] == "standardize does not apply to a token stream"


def test_causal_attention_on_a_non_sequence_is_a_problem_naming_the_node() -> None:
    doc = {"name": "x", "data": {"source": "a.npz", "task": "regression", "input_shape": [3, 8, 8]},
           "model": {"nodes": [{"id": "in", "op": "Input"},
                               {"id": "att", "op": "MultiheadAttention", "params": {"num_heads": 1, "causal": True}},
                               {"id": "out", "op": "Output"}],
                     "edges": [{"source": "in", "target": "att"}, {"source": "att", "target": "out"}]},
           "training": {"loss": "mse"}}
    problems = analyse(PipelineSpec.model_validate(doc)).problems
    assert [(p.node, p.location) for p in problems] == [("att", "model.nodes[att].inputs")]
    assert "a sequence (T, E)" in (problems[0].expected or "")


@pytest.mark.parametrize(("tokens", "suffix", "location", "message"), [
    (np.arange(64, dtype=np.uint16), ".npy", "data.source", "holds 64 tokens: shorter than one block"),
    (np.array([1, 2, 300, 4] * 40, dtype=np.uint16), ".npy", "data.vocab_size", "holds token id 300 at position 2"),
    (np.array([1, 2, 3, 4] * 40, dtype=np.uint16), ".bin", None, None),
    (np.zeros((10, 10), dtype=np.int64), ".npy", "data.source", "cannot be read as a token stream"),
], ids=["short", "id-above-vocabulary", "fine", "not-1d"])
def test_the_token_stream_is_checked_before_any_job(tokens: np.ndarray, suffix: str, location: str | None,
                                                    message: str | None, tmp_path: Path) -> None:
    path = tmp_path / f"train{suffix}"
    np.save(path, tokens) if suffix == ".npy" else tokens.astype("<u2").tofile(path)
    problems = token_stream_problems(path, block_size=64, vocab_size=256)
    if location is None:
        assert problems == []
    else:
        assert [p.location for p in problems] == [location] and message in problems[0].message
        assert str(path) in problems[0].message and problems[0].fix


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> tuple[PipelineSpec, Path]:
    root = tmp_path_factory.mktemp("lm")
    spec = zoo.template("gpt_mini")
    write_example_data(spec, root, record=root.parent / "lm-record.json", samples=30)
    return spec, root


def test_the_example_text_is_read_byte_by_byte_in_windows_shifted_by_one(mini: tuple[PipelineSpec, Path],
                                                                        tmp_path: Path) -> None:
    spec, root = mini
    text = (root / "text" / "corpus.txt").read_bytes()
    assert len(text) == 30 * 64 + 1 and text.startswith(b"the ")
    splits = load_data_module(spec, tmp_path, validate(spec), root=root).load_splits()
    assert sorted(splits) == ["train", "val"] and len(splits["train"]) + len(splits["val"]) == 30
    for split in splits.values():
        assert split.x.shape == split.y.shape == (len(split), 64) and split.x.dtype == split.y.dtype == np.int64
        np.testing.assert_array_equal(split.x[:, 1:], split.y[:, :-1])  # y[t] is the token after x[t]
    windows = np.concatenate([splits["train"].x, splits["val"].x])
    starts = sorted(bytes(w[:8].astype(np.uint8)) for w in windows)  # every window is a block of the text
    assert starts == sorted(text[i * 64:i * 64 + 8] for i in range(30))


def test_the_program_names_the_file_and_token_outside_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "train.npy"
    np.save(path, np.array([5] * 200 + [999] + [5] * 60, dtype=np.uint16))
    spec = _gpt_mini(source=str(path))
    data = load_data_module(spec, tmp_path / "program", validate(spec))
    with pytest.raises(data.DataError, match=rf"{path}: token 200 \(window 3\) is id 999, outside the vocabulary"):
        data.load_splits()
