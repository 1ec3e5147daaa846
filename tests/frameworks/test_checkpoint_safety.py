"""Loading a checkpoint or a final model never runs code (issue 10, finding 3).

A crafted file whose pickle calls ``os.system`` is put where each generated program resumes from
(``checkpoints/ckpt-<step><marker>``, the suffix read from its own ``CHECKPOINT_FILES``): the run
skips it with a warning naming it, starts from step 0, and the command never runs (its marker
file does not appear). The same for paddle's final model ``model/model.pdparams``, which the
portal reads back for ONNX export (:mod:`core.trained`).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.codegen import generate
from core.trained import TrainedModelError, read_trained
from portal.resume import checkpoint_suffixes
from tests.data.fixtures import spec_with_data

pytestmark = pytest.mark.frameworks

ENV = {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": "", "PYTHONWARNINGS": "ignore",
       "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


class Payload:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def crafted_files(marker: Path) -> dict[str, bytes]:
    """A bare pickle, and an .npz whose array is a pickled object (numpy pickles object arrays)."""
    buffer = io.BytesIO()
    np.savez(buffer, state=np.array([Payload(marker)], dtype=object))
    return {"pickle": pickle.dumps(Payload(marker)), "npz": buffer.getvalue()}


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_a_crafted_checkpoint_is_skipped_and_runs_nothing(tmp_path: Path, framework: str) -> None:
    spec = spec_with_data({"source": "sklearn:iris", "preprocessing": [{"op": "standardize"}]})
    folder = tmp_path / "program"
    generate(spec, framework).write(folder)
    suffixes = checkpoint_suffixes(folder)
    assert suffixes, "the program names its checkpoint files"
    program = "\n".join(f.read_text(encoding="utf-8") for f in sorted(folder.glob("*.py")))
    assert "pickle.load" not in program and "paddle.load(" not in program  # loaders that would run code
    marker = tmp_path / "PWNED"
    for kind, data in crafted_files(marker).items():
        out = tmp_path / f"out-{kind}"
        (out / "checkpoints").mkdir(parents=True)
        for suffix in suffixes:  # every file of checkpoint 50, the last one (the marker) included
            (out / "checkpoints" / f"ckpt-50{suffix}").write_bytes(data)
        proc = subprocess.run([sys.executable, "train.py", "--out", str(out), "--max-steps", "2"], cwd=folder,
                              env=ENV, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not marker.exists(), f"{framework} ran the code in a crafted {kind} checkpoint"
        assert "skipping unreadable checkpoint" in proc.stderr and "ckpt-50" in proc.stderr, proc.stderr[-2000:]
        start = json.loads((out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[0])
        assert start["event"] == "start" and start["resumed_from_step"] == 0


def test_a_crafted_paddle_final_model_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    generate(spec_with_data({"source": "sklearn:iris"}), "paddle").write(folder)
    marker = tmp_path / "PWNED"
    (folder / "model").mkdir()
    (folder / "model" / "model.pdparams").write_bytes(crafted_files(marker)["pickle"])
    with pytest.raises(TrainedModelError, match=r"refused to load posix\.system"):
        read_trained(folder, timeout=300)
    assert not marker.exists()
