"""The environments file (settings/environments.py): JSON and TOML, the built-in default, and
every mistake named with its field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.errors import CommandError
from settings.environments import load_environments, parse_environments


def test_no_file_is_this_interpreter_everywhere() -> None:
    default = load_environments(None)
    assert [e.python for e in default.environments] == [sys.executable] and default.scheduler is None
    assert default.environments[0].serves_partition("any") and default.environments[0].local


def test_environments_file_json_and_toml(tmp_path: Path) -> None:
    j = tmp_path / "envs.json"
    j.write_text(json.dumps({"scheduler": "slurm", "environments": [
        {"name": "a", "python": "/opt/a/bin/python", "partitions": "gpu,cpu", "local": False}]}))
    envs = load_environments(j)
    assert envs.scheduler == "slurm" and envs.source == str(j)
    assert envs.environments[0].partitions == ("gpu", "cpu") and envs.environments[0].local is False

    t = tmp_path / "envs.toml"
    t.write_text('[[environments]]\nname = "p"\npython = "/opt/p/bin/python"\nprobe = "srun"\n'
                 'partitions = ["cpu"]\n')
    assert load_environments(t).environments[0].probe == "srun"


@pytest.mark.parametrize(("doc", "message"), [
    ({"environments": {"name": "x"}}, "environments is"),
    ({"environments": [{"name": "x", "pyhton": "/x"}]}, r"environments\[0\] key\(s\) is \['pyhton'\]"),
    ({"environments": [{"name": "x", "frameworks": ["jax"]}]}, "frameworks key is 'jax'"),
    ({"environments": [{"name": "x", "probe": "srun"}]}, "at least one partition"),
    ({"environments": [{"name": "x"}, {"name": "x"}]}, "a unique string"),
    ({"scheduler": "pbs"}, "scheduler is 'pbs'"),
    ({"enviroments": []}, r"top-level key\(s\) is \['enviroments'\]"),
])
def test_environment_errors_name_the_field(doc: dict, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_environments(doc, source="envs.json")


def test_unreadable_environments_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot be read"):
        load_environments(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(CommandError, match="not valid JSON"):
        load_environments(bad)
