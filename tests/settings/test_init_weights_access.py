"""training.init_weights is pinned like data.source: next to the spec file or inside the user's data
roots, an existing file, its real path recorded; anything else is a problem at training.init_weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.errors import SpecError
from core.spec import PipelineSpec
from settings import load_settings
from settings.access import os_user, pin_source


def _setup(tmp_path: Path) -> tuple[object, Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data}"]\n', encoding="utf-8")
    specs = tmp_path / "specs"
    specs.mkdir()
    return load_settings(config, environ={}), data, specs


def _with_weights(path: str) -> PipelineSpec:
    spec = zoo.template("mnist_cnn")
    return spec.model_copy(update={"training": spec.training.model_copy(update={"init_weights": path})})


def test_weights_next_to_the_spec_or_in_the_data_roots_are_pinned_to_their_real_path(tmp_path: Path) -> None:
    settings, data, specs = _setup(tmp_path)
    np.savez(specs / "m.weights.npz", a=np.zeros(1))
    np.savez(data / "w.npz", a=np.zeros(1))
    pinned = pin_source(_with_weights("m.weights.npz"), os_user(), settings, spec_dir=specs)  # type: ignore[arg-type]
    assert pinned.training.init_weights == str((specs / "m.weights.npz").resolve())
    pinned = pin_source(_with_weights("w.npz"), os_user(), settings)  # type: ignore[arg-type]
    assert pinned.training.init_weights == str((data / "w.npz").resolve())


@pytest.mark.parametrize("path", ["/etc/passwd", "../data/w.npz", "missing.npz", "~/w.npz"])
def test_weights_elsewhere_are_refused_at_training_init_weights(tmp_path: Path, path: str) -> None:
    settings, data, specs = _setup(tmp_path)
    np.savez(data / "w.npz", a=np.zeros(1))
    with pytest.raises(SpecError) as err:
        pin_source(_with_weights(path), os_user(), settings, spec_dir=specs)  # type: ignore[arg-type]
    [problem] = err.value.problems
    assert problem.location == "training.init_weights" and str(data.resolve()) in (problem.expected or "")
