"""examples/flowtrain.toml (header sign-in behind a proxy, Slurm) is a settings file that loads."""

from __future__ import annotations

from pathlib import Path

from settings import load_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_example_site_settings_load_as_documented(tmp_path: Path) -> None:
    s = load_settings(EXAMPLES / "flowtrain.toml", environ={}, cwd=tmp_path)
    assert (s.auth.mode, s.auth.header, dict(s.auth.local_users)) == ("header", "X-Remote-User", {})
    assert s.scheduler == "slurm" and s.home == Path("/srv/flowtrain")
    assert s.data_roots == ("/scratch/{user}/data", "/datasets") and s.builtin_datasets
    assert s.user_data_roots == {"alice": ("/project/vision/data", "/datasets")}
    assert s.environments_file == EXAMPLES / "environments.toml"
    assert [(e.name, e.partitions, e.probe) for e in s.environments] == [
        ("torch-gpu", ("gpu",), "srun"), ("cpu-frameworks", ("cpu",), "srun")]


def test_the_environment_overrides_the_example_as_the_readme_says(tmp_path: Path) -> None:
    s = load_settings(EXAMPLES / "flowtrain.toml", environ={"FLOWTRAIN_SCHEDULER": "local",
                                                             "FLOWTRAIN_HOME": str(tmp_path)}, cwd=tmp_path)
    assert s.scheduler == "local" and s.home == tmp_path.resolve()
