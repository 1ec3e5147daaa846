"""Settings file (core/config.py) and users: trusted header, local login, data-path confinement."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError, load_settings
from core.users import AccessError, check_login, check_source, confine, data_roots, hash_password, user_from_headers


def test_defaults_run_a_fresh_checkout_locally(tmp_path: Path):
    s = load_settings(environ={}, cwd=tmp_path)
    assert s.scheduler == "local" and s.auth.mode == "local" and s.builtin_datasets
    assert s.home == tmp_path / "var" and s.data_roots == (str(tmp_path / "data"),)
    assert s.config_path is None and s.environments_file is None


def test_settings_file_with_relative_paths_and_env_home(tmp_path: Path):
    cfg = tmp_path / "etc" / "ft.toml"
    cfg.parent.mkdir()
    cfg.write_text('home = "state"\nscheduler = "slurm"\nenvironments_file = "envs.json"\n'
                   '[data]\nroots = ["/scratch/{user}", "shared"]\nbuiltin_datasets = false\n'
                   '[data.users.alice]\nroots = ["alice-data"]\n'
                   '[auth]\nmode = "header"\nheader = "X-Forwarded-User"\n', encoding="utf-8")
    s = load_settings(environ={"FLOWTRAIN_CONFIG": str(cfg)}, cwd=tmp_path)
    assert s.home == cfg.parent / "state" and s.scheduler == "slurm"
    assert s.environments_file == cfg.parent / "envs.json"
    assert s.data_roots == ("/scratch/{user}", str(cfg.parent / "shared")) and not s.builtin_datasets
    assert s.user_data_roots == {"alice": (str(cfg.parent / "alice-data"),)}
    assert (s.auth.mode, s.auth.header) == ("header", "X-Forwarded-User")
    s2 = load_settings(environ={"FLOWTRAIN_CONFIG": str(cfg), "FLOWTRAIN_HOME": "h"}, cwd=tmp_path)
    assert s2.home == tmp_path / "h"


@pytest.mark.parametrize("text, words", [
    ('schedular = "local"\n', ["schedular"]),
    ('scheduler = "pbs"\n', ["pbs", "slurm"]),
    ('[auth]\nmode = "ldap"\n', ["ldap", "header"]),
    ('[data]\nroots = "data"\n', ["data.roots", "list"]),
    ('[auth]\nheader = "X User"\n', ["auth.header"]),
    ("home = [\n", ["TOML"]),
])
def test_bad_settings_name_the_key(tmp_path: Path, text: str, words: list[str]):
    cfg = tmp_path / "ft.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert str(cfg) in str(err.value) and all(w in str(err.value) for w in words)
    with pytest.raises(ConfigError, match="no such settings file"):
        load_settings(tmp_path / "missing.toml")


def _settings(tmp_path: Path, extra: str = ""):
    cfg = tmp_path / "ft.toml"
    cfg.write_text(f'[data]\nroots = ["{tmp_path}/data/{{user}}", "{tmp_path}/shared"]\n' + extra, encoding="utf-8")
    return load_settings(cfg)


def test_trusted_header_user(tmp_path: Path):
    s = _settings(tmp_path, '[auth]\nmode = "header"\n')
    assert user_from_headers({"x-remote-user": "alice"}, s) == "alice"
    assert user_from_headers({"X-Remote-User": " bob@lab "}, s) == "bob@lab"
    for bad in ({}, {"X-Remote-User": ""}, {"X-Remote-User": "../root"}, {"X-Remote-User": "a b"},
                {"X-Remote-User": "-x"}):
        with pytest.raises(AccessError):
            user_from_headers(bad, s)


def test_local_login_with_password_hashes(tmp_path: Path):
    h = hash_password("s3cret", iterations=1000)
    s = _settings(tmp_path, f'[auth]\nmode = "local"\n[auth.local_users]\nalice = "{h}"\n')
    assert check_login("alice", "s3cret", s) == "alice"
    for name, pw in (("alice", "wrong"), ("bob", "s3cret")):
        with pytest.raises(AccessError, match="wrong password"):
            check_login(name, pw, s)


def test_data_paths_are_confined_per_user(tmp_path: Path):
    s = _settings(tmp_path)
    alice = tmp_path / "data" / "alice"
    (alice / "sub").mkdir(parents=True)
    (tmp_path / "data" / "bob").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "data" / "bob" / "b.csv").write_text("x\n", encoding="utf-8")
    (alice / "sub" / "a.csv").write_text("x\n", encoding="utf-8")
    (alice / "link.csv").symlink_to(tmp_path / "data" / "bob" / "b.csv")
    (alice / "inside.csv").symlink_to(alice / "sub" / "a.csv")
    assert data_roots("alice", s) == [alice.resolve(), (tmp_path / "shared").resolve()]
    assert confine("alice", "sub/a.csv", s) == (alice / "sub" / "a.csv").resolve()
    assert confine("alice", str(alice / "sub" / "a.csv"), s) == (alice / "sub" / "a.csv").resolve()
    assert confine("alice", "inside.csv", s) == (alice / "sub" / "a.csv").resolve()
    assert confine("alice", str(tmp_path / "shared"), s) == (tmp_path / "shared").resolve()
    for bad in ("../bob/b.csv", "sub/../../bob/b.csv", str(tmp_path / "data" / "bob" / "b.csv"), "link.csv",
                "/etc/passwd", "", "a\x00b"):
        with pytest.raises(AccessError):
            confine("alice", bad, s)
    assert check_source("alice", "sklearn:digits", s) == "sklearn:digits"
    with pytest.raises(AccessError, match="unknown built-in"):
        check_source("alice", "sklearn:nope", s)
    with pytest.raises(AccessError):
        data_roots("../x", s)
