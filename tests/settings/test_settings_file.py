"""The settings file's models (settings/settings_file.py): unknown keys named with their section and
a did-you-mean, wrong types with key, received and expected, every problem at once, and the JSON
Schema that `python -m flowtrain settings-schema` prints accepting the shipped example file."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from settings import ConfigError, load_settings
from settings.settings_file import SettingsFile, SlurmTable, env_var

REPO = Path(__file__).resolve().parents[2]


def _problems(tmp_path: Path, text: str) -> ConfigError:
    cfg = tmp_path / "ft.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    return err.value


def test_an_unknown_key_is_named_with_its_section_and_the_closest_key(tmp_path: Path) -> None:
    err = _problems(tmp_path, '[selector]\nmax_age = 3\n')
    [p] = err.problems
    assert p.location == "selector.max_age" and p.fix == "did you mean selector.max_age_days?"
    assert "selector.steps" in (p.expected or "")
    assert str(err).startswith(f"{tmp_path / 'ft.toml'}: selector.max_age is not a known setting")
    [p] = _problems(tmp_path, '[data.users.bob]\nroot = ["x"]\n').problems
    assert p.location == "data.users.bob.root" and p.fix == "did you mean data.users.bob.roots?"
    [p] = _problems(tmp_path, 'colour = "blue"\n').problems
    assert p.location == "colour" and p.fix is not None and "did you mean" not in p.fix


def test_a_wrong_type_names_key_received_and_expected(tmp_path: Path) -> None:
    [p] = _problems(tmp_path, '[auth]\nsession_hours = "8"\n').problems
    assert (p.location, p.received, p.expected) == ("auth.session_hours", "'8'", "a number")
    [p] = _problems(tmp_path, '[data]\nbuiltin_datasets = 1\n').problems
    assert (p.location, p.received, p.expected) == ("data.builtin_datasets", "1", "true or false")
    [p] = _problems(tmp_path, '[selector]\nsteps = 2.5\n').problems
    assert (p.location, p.expected) == ("selector.steps", "a whole number")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    err = _problems(tmp_path, 'schedular = "slurm"\n[data]\nroots = "data"\n[portal]\nport = 1\n')
    assert sorted(p.location for p in err.problems) == ["data.roots", "portal.port", "schedular"]
    assert str(err).startswith("3 problems")
    err = _problems(tmp_path, '[auth]\nmode = "header"\n[portal]\naddress = "everywhere"\n')
    assert sorted(p.location for p in err.problems) == ["auth.mode", "portal.address"]


def test_an_environment_override_is_checked_as_its_key_is() -> None:
    assert env_var(SlurmTable, "transport") == "FLOWTRAIN_SLURM_TRANSPORT"
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"FLOWTRAIN_CALIBRATE": "always"})
    [p] = err.value.problems
    assert p.location == "FLOWTRAIN_CALIBRATE" and "missing" in (p.expected or "")
    assert load_settings(environ={"FLOWTRAIN_ADDRESS": "0.0.0.0"}).portal_address == "0.0.0.0"
    with pytest.raises(ConfigError, match="FLOWTRAIN_ADDRESS = 'everywhere' is not an IP address"):
        load_settings(environ={"FLOWTRAIN_ADDRESS": "everywhere"})


def test_the_schema_command_validates_the_example_file_and_names_the_overrides() -> None:
    out = subprocess.run([sys.executable, "-m", "flowtrain", "settings-schema"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    assert schema == SettingsFile.model_json_schema()
    example = tomllib.loads((REPO / "examples" / "flowtrain.toml").read_text(encoding="utf-8"))
    jsonschema.validate(example, schema)
    with pytest.raises(jsonschema.ValidationError, match="rest_port"):
        jsonschema.validate({**example, "slurm": {"rest_port": 6820}}, schema)
    assert schema["properties"]["home"]["env"] == "FLOWTRAIN_HOME"
    assert schema["$defs"]["SelectorTable"]["properties"]["calibrate"]["env"] == "FLOWTRAIN_CALIBRATE"
