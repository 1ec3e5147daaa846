"""A submission whose starting weights no longer fit the graph is refused before any job, with one
problem naming every misfit node (the run would otherwise fail inside its program)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.errors import SpecError
from core.validate import validate
from core.weights import random_canonical
from schedulers.launch import check
from settings import load_settings
from settings.access import os_user


def test_weights_that_do_not_fit_are_a_problem_before_any_job(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data}"]\n', encoding="utf-8")
    settings = load_settings(config, environ={})
    spec = zoo.template("mnist_cnn")
    given = random_canonical(validate(spec))
    np.savez(data / "w.npz", **given)
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"init_weights": "w.npz"})})
    assert check(spec, os_user(), settings).spec.training.init_weights == str((data / "w.npz").resolve())
    head = next(k for k in reversed(given) if k.endswith("/weight"))
    np.savez(data / "w.npz", **{**given, head: np.zeros((3, 3), np.float32)})
    with pytest.raises(SpecError) as err:
        check(spec, os_user(), settings)
    [problem] = err.value.problems
    assert problem.location == "training.init_weights"
    assert f"do not fit 1 node(s): {head.split('/')[0]}" in problem.message


def test_a_token_stream_shorter_than_one_block_is_a_problem_before_any_job(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data}"]\n', encoding="utf-8")
    settings = load_settings(config, environ={})
    (data / "corpus.txt").write_bytes(b"the plot is good. " * 4)  # 72 bytes: gpt_mini reads 64 + 1 at once
    doc = zoo.template("gpt_mini").model_dump(mode="json")
    doc["data"]["source"] = "corpus.txt"
    spec = type(zoo.template("gpt_mini")).model_validate(doc)
    assert check(spec, os_user(), settings).spec.data.source == str((data / "corpus.txt").resolve())
    (data / "corpus.txt").write_bytes(b"too short")
    with pytest.raises(SpecError) as err:
        check(spec, os_user(), settings)
    [problem] = err.value.problems
    assert problem.location == "data.source" and "holds 9 tokens: shorter than one block" in problem.message
