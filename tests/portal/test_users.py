"""Users (portal/users.py): trusted header, local login, data-path confinement. The settings file
itself: tests/settings/test_config.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.users import AccessError, check_login, check_source, confine, data_roots, hash_password, user_from_headers
from settings import load_settings


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
