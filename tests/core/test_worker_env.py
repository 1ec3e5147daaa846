"""The worker that imports a generated or a run's ``model.py`` (the equivalence check, reading a run's final
model for its model.onnx) starts from the jobs' allow-list (core/allowed_env.py), not the portal's environment:
a run's model.py is the user's code, and the portal's environment holds tokens and keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.equivalence import run_worker
from core.trained import TrainedModelError, read_trained

SECRETS = {"AWS_SECRET_ACCESS_KEY": "k", "FLOWTRAIN_PROXY_SECRET_FILE": "/etc/flowtrain/secret", "GITHUB_TOKEN": "t"}


def _program(folder: Path) -> Path:
    """A 'torch' program whose model.py records the environment it is imported in, then stops."""
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"framework": "torch"}))
    (folder / "model.py").write_text("import json, os\n"
                                     "from pathlib import Path\n"
                                     "Path(__file__).with_name('env.json').write_text(json.dumps(sorted(os.environ)))\n"
                                     "raise SystemExit('recorded')\n")
    (folder / "model").mkdir()
    (folder / "model" / "model.pt").write_bytes(b"")  # the final model a completed run leaves
    return folder


@pytest.fixture
def portal_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")


def test_the_equivalence_worker_sees_the_allow_list_only(tmp_path: Path, portal_secrets: None) -> None:
    program = _program(tmp_path / "prog")
    job = {"dir": str(program), "weights": "unused.npz", "inputs": "unused.npz", "out": str(tmp_path / "out.npz")}
    run_worker("torch", [job], tmp_path, timeout=120)
    seen = set(json.loads((program / "env.json").read_text()))
    assert not seen & set(SECRETS)
    assert {"PATH", "LC_ALL", "PYTHONPATH"} <= seen


def test_reading_a_runs_final_model_for_model_onnx_sees_the_allow_list_only(tmp_path: Path,
                                                                            portal_secrets: None) -> None:
    program = _program(tmp_path / "run")
    with pytest.raises(TrainedModelError):
        read_trained(program, timeout=120)
    seen = set(json.loads((program / "env.json").read_text()))
    assert not seen & set(SECRETS) and "PATH" in seen
