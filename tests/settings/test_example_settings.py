"""examples/flowtrain.toml (header sign-in behind a proxy, Slurm) with examples/environments.toml is a
settings file that loads as the README says, once its proxy secret exists."""

from __future__ import annotations

import shutil
from pathlib import Path

from settings import load_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _site(tmp_path: Path) -> Path:
    """The two example files beside a proxy secret, as an administrator would install them."""
    for name in ("flowtrain.toml", "environments.toml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    secret = tmp_path / "proxy.secret"
    secret.write_text("a" * 64 + "\n", encoding="utf-8")
    secret.chmod(0o600)
    return tmp_path / "flowtrain.toml"


def test_the_example_site_settings_load_as_documented(tmp_path: Path) -> None:
    s = load_settings(_site(tmp_path), environ={}, cwd=tmp_path)
    assert (s.auth.mode, s.auth.header, dict(s.auth.local_users)) == ("header", "X-Remote-User", {})
    assert s.scheduler == "slurm" and s.home == Path("/srv/flowtrain")
    assert s.data_roots == ("/scratch/{user}/data", "/datasets") and s.builtin_datasets
    assert s.user_data_roots == {"alice": ("/project/vision/data",)}
    assert s.environments_file == tmp_path / "environments.toml"
    assert (s.selector.calibrate, s.selector.max_age_days) == ("missing", 30.0)
    assert [(e.name, e.partitions, e.probe) for e in s.environments] == [
        ("torch-gpu", ("gpu",), "srun"), ("cpu-frameworks", ("cpu",), "srun")]


def test_the_environment_overrides_the_example_as_the_readme_says(tmp_path: Path) -> None:
    s = load_settings(_site(tmp_path), environ={"FLOWTRAIN_SCHEDULER": "local", "FLOWTRAIN_HOME": str(tmp_path)},
                      cwd=tmp_path)
    assert s.scheduler == "local" and s.home == tmp_path.resolve()
