"""One settings object for the portal and the command line (settings/config.py): the file, its
defaults, which source wins for home, scheduler and environments, and every mistake named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import CommandError
from settings import ConfigError, SlurmSettings, flowtrain_home, load_settings, slurm_settings
from settings.access import os_user

REPO = Path(__file__).resolve().parents[2]


def envs_file(path: Path, scheduler: str | None = None) -> Path:
    doc: dict = {"environments": [{"name": path.stem, "python": "/opt/x/bin/python", "frameworks": ["torch"]}]}
    if scheduler:
        doc["scheduler"] = scheduler
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_defaults_run_a_fresh_checkout_locally(tmp_path: Path) -> None:
    s = load_settings(environ={}, cwd=tmp_path)
    assert s.scheduler == "local" and s.auth.mode == "local" and s.builtin_datasets
    assert s.home == tmp_path.resolve() / "var" and s.data_roots == (str(tmp_path / "data"),)
    assert s.config_path is None and s.environments_file is None
    assert [e.python for e in s.environments] == [sys.executable] and s.environments_source == "(built-in default)"


def test_settings_file_with_relative_paths_and_env_home(tmp_path: Path) -> None:
    cfg = tmp_path / "etc" / "ft.toml"
    cfg.parent.mkdir()
    envs_file(cfg.parent / "envs.json")
    cfg.write_text('home = "state"\nscheduler = "slurm"\nenvironments_file = "envs.json"\n'
                   '[data]\nroots = ["/scratch/{user}", "shared"]\nbuiltin_datasets = false\n'
                   '[data.users.alice]\nroots = ["alice-data"]\n'
                   '[auth]\nmode = "header"\nheader = "X-Forwarded-User"\ntrusted_proxies = ["10.0.0.5"]\n',
                   encoding="utf-8")
    s = load_settings(environ={"FLOWTRAIN_CONFIG": str(cfg)}, cwd=tmp_path)
    assert s.home == cfg.parent.resolve() / "state" and s.scheduler == "slurm"
    assert s.environments_file == cfg.parent / "envs.json" and [e.name for e in s.environments] == ["envs"]
    assert s.data_roots == ("/scratch/{user}", str(cfg.parent / "shared")) and not s.builtin_datasets
    assert s.user_data_roots == {"alice": (str(cfg.parent / "alice-data"),)}
    assert (s.auth.mode, s.auth.header, s.auth.trusted_proxies) == ("header", "X-Forwarded-User", ("10.0.0.5/32",))
    s2 = load_settings(environ={"FLOWTRAIN_CONFIG": str(cfg), "FLOWTRAIN_HOME": "h"}, cwd=tmp_path)
    assert s2.home == tmp_path.resolve() / "h"


def test_home_is_resolved_in_one_place(tmp_path: Path) -> None:
    """FLOWTRAIN_HOME > the file's home > ./var, always absolute; flowtrain_home() agrees with the object."""
    cfg = tmp_path / "ft.toml"
    cfg.write_text('home = "from-file"\n', encoding="utf-8")
    cases = [
        ({}, tmp_path / "var"),
        ({"FLOWTRAIN_CONFIG": str(cfg)}, tmp_path / "from-file"),
        ({"FLOWTRAIN_CONFIG": str(cfg), "FLOWTRAIN_HOME": "from-env"}, tmp_path / "from-env"),
        ({"FLOWTRAIN_HOME": str(tmp_path / "abs")}, tmp_path / "abs"),
    ]
    for environ, expected in cases:
        assert load_settings(environ=environ, cwd=tmp_path).home == expected.resolve(), environ
        assert flowtrain_home(environ=environ, cwd=tmp_path) == expected.resolve(), environ


def test_scheduler_and_environments_precedence(tmp_path: Path) -> None:
    """FLOWTRAIN_SCHEDULER > the settings file > the environments file > local;
    FLOWTRAIN_ENVIRONMENTS > the settings file's environments_file."""
    from_env = envs_file(tmp_path / "from-env.json", scheduler="slurm")
    from_file = envs_file(tmp_path / "from-file.json")
    cfg = tmp_path / "ft.toml"
    cfg.write_text(f'environments_file = "{from_file}"\n', encoding="utf-8")
    base = {"FLOWTRAIN_CONFIG": str(cfg)}
    s = load_settings(environ=base, cwd=tmp_path)
    assert (s.scheduler, [e.name for e in s.environments]) == ("local", ["from-file"])
    s = load_settings(environ={**base, "FLOWTRAIN_ENVIRONMENTS": str(from_env)}, cwd=tmp_path)
    assert (s.scheduler, [e.name for e in s.environments]) == ("slurm", ["from-env"])
    assert s.environments_source == str(from_env)
    cfg.write_text(f'scheduler = "local"\nenvironments_file = "{from_env}"\n', encoding="utf-8")
    assert load_settings(environ=base, cwd=tmp_path).scheduler == "local"  # the settings file beats envs file
    assert load_settings(environ={**base, "FLOWTRAIN_SCHEDULER": "slurm"}, cwd=tmp_path).scheduler == "slurm"
    with pytest.raises(CommandError, match="FLOWTRAIN_SCHEDULER='pbs'; expected local or slurm"):
        load_settings(environ={"FLOWTRAIN_SCHEDULER": "pbs"}, cwd=tmp_path)


@pytest.mark.parametrize("text, words", [
    ('schedular = "local"\n', ["schedular"]),
    ('scheduler = "pbs"\n', ["pbs", "slurm"]),
    ('[auth]\nmode = "ldap"\n', ["ldap", "header"]),
    ('[data]\nroots = "data"\n', ["data.roots", "list"]),
    ('[auth]\nheader = "X User"\n', ["auth.header"]),
    ('[auth]\nmode = "header"\n', ["auth.mode", "trusted proxy", "proxy_secret_file", "trusted_proxies"]),
    ('[auth]\nmode = "header"\ntrusted_proxies = ["127.0.0.1"]\n', ["loopback", "proxy_secret_file"]),
    ('[auth]\ntrusted_proxies = ["proxy.example"]\n', ["auth.trusted_proxies", "proxy.example"]),
    ('[auth]\nproxy_secret_file = "missing.secret"\n', ["auth.proxy_secret_file", "cannot be read"]),
    ('[auth]\nsession_hours = 0\n', ["auth.session_hours"]),
    ('[auth]\nadmins = "root"\n', ["auth.admins", "list"]),
    ('[portal]\naddress = "everywhere"\n', ["portal.address"]),
    ('[slurm]\ntransport = "pigeon"\n', ["slurm.transport", "pigeon", "rest"]),
    ('[slurm]\ntransport = "rest"\n', ["slurm.transport", "rest_url"]),
    ('[slurm]\nrest_url = "slurm:6820"\n', ["slurm.rest_url", "http://"]),
    ('[slurm]\nrest_port = 6820\n', ["slurm.rest_port", "slurm.rest_url"]),
    ('[selector]\ncalibrate = "always"\n', ["selector.calibrate", "always", "missing"]),
    ('[selector]\nsteps = 0\n', ["selector.steps", "positive"]),
    ('[selector]\nmax_age = 3\n', ["selector.max_age"]),
    ('[tracking]\nmlflow_uri = "mlflow.example:5000"\n', ["tracking.mlflow_uri", "http://", "mlflow server"]),
    ('[tracking]\nmlflow = "http://x"\n', ["tracking.mlflow", "tracking.mlflow_uri"]),
    ("home = [\n", ["TOML"]),
])
def test_bad_settings_name_the_key(tmp_path: Path, text: str, words: list[str]) -> None:
    cfg = tmp_path / "ft.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert str(cfg) in str(err.value) and all(w in str(err.value) for w in words)
    with pytest.raises(ConfigError, match="no such settings file"):
        load_settings(tmp_path / "missing.toml", environ={})


def test_the_mlflow_uri_comes_from_the_file_or_mlflow_s_own_variable(tmp_path: Path) -> None:
    cfg = tmp_path / "ft.toml"
    cfg.write_text('[tracking]\nmlflow_uri = "http://mlflow.example:5000/"\nexperiment = "vision"\n')
    tracking = load_settings(cfg, environ={}).tracking
    assert (tracking.mlflow_uri, tracking.experiment) == ("http://mlflow.example:5000", "vision")
    tracking = load_settings(cfg, environ={"MLFLOW_TRACKING_URI": "https://other:443"}).tracking
    assert (tracking.mlflow_uri, tracking.source) == ("https://other:443", "MLFLOW_TRACKING_URI")
    assert load_settings(None, environ={}, cwd=tmp_path).tracking.mlflow_uri is None


def test_proxy_secret_file_must_be_private_and_long(tmp_path: Path) -> None:
    secret = tmp_path / "proxy.secret"
    cfg = tmp_path / "ft.toml"
    cfg.write_text('[auth]\nmode = "header"\nproxy_secret_file = "proxy.secret"\n', encoding="utf-8")
    secret.write_text("x" * 40 + "\n", encoding="utf-8")
    secret.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_settings(cfg, environ={})
    secret.chmod(0o600)
    assert load_settings(cfg, environ={}).auth.proxy_secret == "x" * 40
    secret.write_text("short\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="shorter than"):
        load_settings(cfg, environ={})


def test_portal_binds_loopback_unless_told(tmp_path: Path) -> None:
    assert load_settings(environ={}, cwd=tmp_path).portal_address == "127.0.0.1"
    cfg = tmp_path / "ft.toml"
    cfg.write_text('[portal]\naddress = "0.0.0.0"\n', encoding="utf-8")
    assert load_settings(cfg, environ={}).portal_address == "0.0.0.0"
    script = (REPO / "scripts" / "portal.sh").read_text(encoding="utf-8")
    assert "--server.address" in script and "portal_address" in script


def test_slurm_transport_settings_and_their_variables(tmp_path: Path) -> None:
    assert load_settings(environ={}, cwd=tmp_path).slurm == SlurmSettings(source="(default)")
    cfg = tmp_path / "ft.toml"
    cfg.write_text('[slurm]\ntransport = "rest"\nrest_url = "http://rest:6820"\nrest_token = "tok/jwt"\n')
    s = load_settings(cfg, environ={}).slurm
    assert (s.transport, s.rest_url, s.rest_token) == ("rest", "http://rest:6820", str(tmp_path / "tok" / "jwt"))
    assert slurm_settings({"FLOWTRAIN_CONFIG": str(cfg)}) == s  # the executor's own reading agrees
    over = slurm_settings({"FLOWTRAIN_CONFIG": str(cfg), "FLOWTRAIN_SLURM_TRANSPORT": "Commands",
                           "FLOWTRAIN_SLURM_REST_TOKEN": "env"}, cwd=tmp_path)
    assert (over.transport, over.source, over.rest_token) == ("commands", "FLOWTRAIN_SLURM_TRANSPORT", "env")
    with pytest.raises(ConfigError, match='FLOWTRAIN_SLURM_TRANSPORT = "rest" needs the address of slurmrestd'):
        slurm_settings({"FLOWTRAIN_SLURM_TRANSPORT": "rest"})


def test_command_line_honours_the_settings_file(tmp_path: Path) -> None:
    """No FLOWTRAIN_HOME: the CLI keeps its registry where the settings file's home says, and takes the
    environments file the settings file names, as the portal does."""
    envs = envs_file(tmp_path / "site-envs.json")
    cfg = tmp_path / "ft.toml"
    cfg.write_text(f'home = "site-home"\nenvironments_file = "{envs}"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_CONFIG=str(cfg))
    runs = subprocess.run([sys.executable, "-m", "flowtrain", "runs"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.strip() == f"no runs for user {os_user()}"
    assert (tmp_path / "site-home" / "flowtrain.db").is_file() and not (REPO / "site-home").exists()
    fws = subprocess.run([sys.executable, "-m", "flowtrain", "frameworks", "--json"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert fws.returncode == 0, fws.stderr
    doc = json.loads(fws.stdout)
    assert doc["source"] == str(envs) and [e["environment"]["name"] for e in doc["environments"]] == ["site-envs"]


def test_the_example_deployment_settings_load(tmp_path: Path) -> None:
    """examples/flowtrain.toml (README "Deployment") is a valid settings file once its secret exists."""
    cfg = tmp_path / "flowtrain.toml"
    cfg.write_text((REPO / "examples" / "flowtrain.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "environments.toml").write_text(
        '[[environments]]\nname = "site"\npython = "/usr/bin/python3"\nframeworks = ["torch"]\n', encoding="utf-8")
    secret = tmp_path / "proxy.secret"
    secret.write_text("f" * 64 + "\n", encoding="utf-8")
    secret.chmod(0o600)
    s = load_settings(cfg, environ={})
    assert (s.scheduler, s.portal_address, s.auth.mode, s.auth.proxy_secret) == ("slurm", "127.0.0.1", "header",
                                                                                  "f" * 64)
    assert s.auth.admins == ("flowtrain-admin",) and s.data_roots[0] == "/scratch/{user}/data"


def test_selector_settings_and_their_variable(tmp_path: Path) -> None:
    assert load_settings(environ={}, cwd=tmp_path).selector.calibrate == "never"
    cfg = tmp_path / "ft.toml"
    cfg.write_text('[selector]\ncalibrate = "missing"\nmax_age_days = 7\nsteps = 5\n', encoding="utf-8")
    sel = load_settings(cfg, environ={}).selector
    assert (sel.calibrate, sel.max_age_days, sel.steps, sel.time_limit_min) == ("missing", 7.0, 5, 10)
    assert load_settings(cfg, environ={"FLOWTRAIN_CALIBRATE": "never"}).selector.calibrate == "never"
    with pytest.raises(ConfigError, match="FLOWTRAIN_CALIBRATE = 'sometimes'"):
        load_settings(cfg, environ={"FLOWTRAIN_CALIBRATE": "sometimes"})
