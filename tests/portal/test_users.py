"""Users (portal/users.py): the trusted proxy's header, local logins (hash work, throttling, session
expiry) and data-path confinement (settings/access.py). The settings file itself:
tests/settings/test_config.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from portal import passwords
from portal.users import (
    PBKDF2_ITERATIONS,
    AccessError,
    LoginThrottle,
    check_login,
    check_user_name,
    confine,
    data_roots,
    hash_password,
    resolve_source,
    session_expired,
    user_from_request,
)
from settings import load_settings

SECRET = "0123456789abcdef0123456789abcdef"


def _settings(tmp_path: Path, extra: str = ""):
    cfg = tmp_path / "ft.toml"
    cfg.write_text(f'[data]\nroots = ["{tmp_path}/data/{{user}}", "{tmp_path}/shared"]\n' + extra, encoding="utf-8")
    return load_settings(cfg)


def _header_settings(tmp_path: Path, proxies: str = "", secret: bool = True):
    lines = ['[auth]', 'mode = "header"']
    if secret:
        path = tmp_path / "proxy.secret"
        path.write_text(SECRET + "\n", encoding="utf-8")
        path.chmod(0o600)
        lines.append(f'proxy_secret_file = "{path}"')
    if proxies:
        lines.append(f"trusted_proxies = {proxies}")
    return _settings(tmp_path, "\n".join(lines) + "\n")


def test_trusted_header_user_from_the_proxy(tmp_path: Path):
    s = _header_settings(tmp_path)
    proxy = [("X-FlowTrain-Proxy-Secret", SECRET)]
    assert user_from_request([*proxy, ("x-remote-user", "alice")], None, s) == "alice"
    assert user_from_request([*proxy, ("X-Remote-User", " bob@lab ")], "10.1.2.3", s) == "bob@lab"
    for bad in ([], [("X-Remote-User", "")], [("X-Remote-User", "../root")], [("X-Remote-User", "a b")],
                [("X-Remote-User", "-x")]):
        with pytest.raises(AccessError):
            user_from_request([*proxy, *bad], None, s)


def test_user_names_match_whole():
    """``$`` with ``match`` lets a trailing newline through; names are checked with fullmatch."""
    assert check_user_name("alice") == "alice"
    for bad in ("alice\n", "alice\nbob", "a" * 65, ".hidden"):
        with pytest.raises(AccessError, match="not accepted"):
            check_user_name(bad)


def test_forged_header_without_the_proxy_secret_is_refused(tmp_path: Path):
    """Anyone who reaches the port directly can send X-Remote-User; only the proxy knows the secret."""
    s = _header_settings(tmp_path)
    for secret_headers in ([], [("X-FlowTrain-Proxy-Secret", "guess")],
                           [("X-FlowTrain-Proxy-Secret", SECRET), ("X-FlowTrain-Proxy-Secret", SECRET)]):
        with pytest.raises(AccessError, match="did not come through the portal's sign-in proxy"):
            user_from_request([*secret_headers, ("X-Remote-User", "alice")], None, s)


def test_forged_header_from_an_untrusted_address_is_refused(tmp_path: Path):
    s = _header_settings(tmp_path, proxies='["10.0.0.5", "192.168.7.0/24"]', secret=False)
    assert user_from_request([("X-Remote-User", "alice")], "10.0.0.5", s) == "alice"
    assert user_from_request([("X-Remote-User", "alice")], "192.168.7.44", s) == "alice"
    with pytest.raises(AccessError, match="not one of the portal's trusted proxies"):
        user_from_request([("X-Remote-User", "alice")], "10.0.0.6", s)
    with pytest.raises(AccessError, match="not an IP address"):
        user_from_request([("X-Remote-User", "alice")], "not-an-address", s)
    for loopback in (None, "127.0.0.2", "::1", "::ffff:127.0.0.1"):
        with pytest.raises(AccessError, match="only the proxy secret proves a proxy on this machine"):
            user_from_request([("X-Remote-User", "alice")], loopback, s)


def test_an_address_from_x_forwarded_for_does_not_count(tmp_path: Path):
    """Streamlit's server takes the client address from X-Forwarded-For on loopback connections: an
    address the request itself names there proves nothing, however it is written."""
    s = _header_settings(tmp_path, proxies='["10.0.0.5", "2001:db8::5"]', secret=False)
    for forwarded, peer in (("10.0.0.5", "10.0.0.5"), ("192.0.2.7, 10.0.0.5", "10.0.0.5"),
                            ("10.0.0.5:4431", "10.0.0.5"), ("[2001:db8::5]:443", "2001:db8::5")):
        with pytest.raises(AccessError, match="X-Forwarded-For header says"):
            user_from_request([("x-forwarded-for", forwarded), ("X-Remote-User", "hpcadmin")], peer, s)
    # The proxy's own connection with the client's address forwarded, as Apache and nginx send it.
    assert user_from_request([("X-Forwarded-For", "192.0.2.7"), ("X-Remote-User", "alice")], "10.0.0.5", s) == "alice"
    # A proxy on this host, listed and sending the secret, is believed from loopback (however the
    # server rewrote the address); without the secret it never is (the settings refuse that).
    local = _header_settings(tmp_path, proxies='["127.0.0.1"]', secret=True)
    proxy = [("X-FlowTrain-Proxy-Secret", SECRET)]
    assert user_from_request([*proxy, ("X-Remote-User", "alice")], None, local) == "alice"
    assert user_from_request([*proxy, ("X-Forwarded-For", "192.0.2.7"), ("X-Remote-User", "alice")], "192.0.2.7",
                             local) == "alice"
    local6 = _header_settings(tmp_path, proxies='["::1"]', secret=True)
    assert user_from_request([*proxy, ("X-Remote-User", "alice")], None, local6) == "alice"
    with pytest.raises(AccessError, match="did not come through the portal's sign-in proxy"):
        user_from_request([("X-Remote-User", "alice")], None, local6)


def test_two_identity_headers_are_refused(tmp_path: Path):
    """A proxy that appends its header must not lose to the one the client sent."""
    s = _header_settings(tmp_path)
    proxy = [("X-FlowTrain-Proxy-Secret", SECRET)]
    with pytest.raises(AccessError, match="more than one user"):
        user_from_request([*proxy, ("X-Remote-User", "mallory"), ("x-remote-user", "alice")], None, s)
    with pytest.raises(AccessError, match="comma-joined"):
        user_from_request([*proxy, ("X-Remote-User", "mallory, alice")], None, s)


def test_local_login_with_password_hashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert PBKDF2_ITERATIONS >= 600_000 and hash_password("s3cret").split("$")[1] == str(PBKDF2_ITERATIONS)
    monkeypatch.setattr(passwords, "PBKDF2_ITERATIONS", 20_000)  # the tests' current count: quicker
    old = hash_password("0ld-s3cret", iterations=1000)  # an older, cheaper hash still verifies
    new = hash_password("s3cret")
    s = _settings(tmp_path, f'[auth]\nmode = "local"\n[auth.local_users]\nalice = "{new}"\ncarol = "{old}"\n')
    assert check_login("alice", "s3cret", s) == "alice"
    assert check_login("carol", "0ld-s3cret", s) == "carol"
    for name, pw in (("alice", "wrong"), ("bob", "s3cret")):
        with pytest.raises(AccessError, match="unknown user or wrong password"):
            check_login(name, pw, s)


def _pbkdf2_work(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The iterations of every PBKDF2 call from now on."""
    calls: list[int] = []
    real = hashlib.pbkdf2_hmac

    def counting(name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
        calls.append(iterations)
        return real(name, password, salt, iterations)

    monkeypatch.setattr(passwords.hashlib, "pbkdf2_hmac", counting)
    return calls


def test_every_failed_attempt_costs_the_same_hashing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Timing must not tell which names exist: a name with an older, cheaper hash, one with a current
    hash and an unknown one all cost the current count's work."""
    monkeypatch.setattr(passwords, "PBKDF2_ITERATIONS", 20_000)
    s = _settings(tmp_path, f'[auth]\nmode = "local"\n[auth.local_users]\nold = "{hash_password("pw", iterations=5000)}"'
                            f'\ncurrent = "{hash_password("pw")}"\n')
    work = {}
    for name in ("old", "current", "nobody"):
        calls = _pbkdf2_work(monkeypatch)
        with pytest.raises(AccessError, match="unknown user or wrong password"):
            check_login(name, "wrong", s)
        work[name] = sum(calls)
    assert work == {"old": 20_000, "current": 20_000, "nobody": 20_000}
    # a stored count above the current one sets every attempt's work
    s = _settings(tmp_path, f'[auth]\nmode = "local"\n[auth.local_users]\nslow = "{hash_password("pw", iterations=30_000)}"'
                            f'\ncurrent = "{hash_password("pw")}"\n')
    for name in ("current", "nobody", "slow"):
        calls = _pbkdf2_work(monkeypatch)
        with pytest.raises(AccessError):
            check_login(name, "wrong", s)
        assert sum(calls) == 30_000, name


def test_a_good_password_upgrades_an_older_hash_in_the_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(passwords, "PBKDF2_ITERATIONS", 20_000)
    old = hash_password("pw", iterations=1000)
    s = _settings(tmp_path, f'[auth]\nmode = "local"\n[auth.local_users]\ncarol = "{old}"\n')
    config = tmp_path / "ft.toml"
    config.chmod(0o640)
    with pytest.raises(AccessError):
        check_login("carol", "wrong", s)
    assert old in config.read_text(encoding="utf-8")  # a wrong password changes nothing
    notes: list[str] = []
    assert check_login("carol", "pw", s, notes=notes) == "carol" and notes == []
    upgraded = load_settings(config)
    stored = upgraded.auth.local_users["carol"]
    assert stored.split("$")[1] == "20000" and old not in config.read_text(encoding="utf-8")
    assert config.stat().st_mode & 0o777 == 0o640 and upgraded.data_roots == s.data_roots
    assert check_login("carol", "pw", upgraded, notes=notes) == "carol" and notes == []
    assert load_settings(config).auth.local_users["carol"] == stored  # a current hash is left alone
    # a hash the file holds twice (here in a comment too) is not rewritten: the user is told why
    config.write_text(config.read_text(encoding="utf-8").replace(stored, old) + f"# was {old}\n", encoding="utf-8")
    assert check_login("carol", "pw", load_settings(config), notes=notes) == "carol"
    assert len(notes) == 1 and "not upgraded" in notes[0] and str(config) in notes[0]


def test_failed_logins_are_throttled_per_user_from_an_address_and_per_address(tmp_path: Path):
    s = _settings(tmp_path, f'[auth]\nmode = "local"\n[auth.local_users]\nalice = "{hash_password("pw", iterations=100)}"\n')
    now = [1000.0]
    throttle = LoginThrottle(max_failures=3, lockout_s=60, clock=lambda: now[0])
    for _ in range(3):
        with pytest.raises(AccessError, match="wrong password"):
            check_login("alice", "guess", s, throttle=throttle, address="10.0.0.9")
    # Locked: even the right password is refused, without hashing, for this user from this address...
    with pytest.raises(AccessError, match="too many failed sign-ins"):
        check_login("alice", "pw", s, throttle=throttle, address="10.0.0.9")
    # ...and for any name from the guessing address; but the guesser cannot lock alice out elsewhere.
    with pytest.raises(AccessError, match="too many failed sign-ins"):
        check_login("bob", "pw", s, throttle=throttle, address="10.0.0.9")
    assert check_login("alice", "pw", s, throttle=throttle, address="10.0.0.77") == "alice"
    now[0] += 61
    assert check_login("alice", "pw", s, throttle=throttle, address="10.0.0.9") == "alice"
    # A good password clears the name's failures from that address; the address keeps its own, and
    # each further failure after a lockout doubles it.
    assert throttle.retry_after("alice", "10.0.0.1") == 0
    with pytest.raises(AccessError, match="wrong password"):
        check_login("zed", "guess", s, throttle=throttle, address="10.0.0.9")
    assert throttle.retry_after("anyone", "10.0.0.9") == pytest.approx(120)


def test_throttle_memory_is_bounded():
    throttle = LoginThrottle(max_entries=100)
    for i in range(1000):
        throttle.failed(f"user{i}", f"10.0.{i // 256}.{i % 256}")
    assert len(throttle) == 100


def test_sessions_expire(tmp_path: Path):
    s = _settings(tmp_path, '[auth]\nmode = "local"\nsession_hours = 2\n')
    assert not session_expired(1000.0, s, now=1000.0 + 2 * 3600 - 1)
    assert session_expired(1000.0, s, now=1000.0 + 2 * 3600 + 1)
    assert session_expired(None, s, now=1000.0)
    assert load_settings(environ={}, cwd=tmp_path).auth.session_hours == 8


def test_data_paths_are_confined_per_user(tmp_path: Path):
    s = _settings(tmp_path)
    alice = tmp_path / "data" / "alice"
    (alice / "sub").mkdir(parents=True)
    (tmp_path / "data" / "bob").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "data" / "bob" / "b.csv").write_text("x\n", encoding="utf-8")
    (alice / "sub" / "a.csv").write_text("x\n", encoding="utf-8")
    (tmp_path / "shared" / "common.csv").write_text("x\n", encoding="utf-8")
    (alice / "link.csv").symlink_to(tmp_path / "data" / "bob" / "b.csv")
    (alice / "inside.csv").symlink_to(alice / "sub" / "a.csv")
    assert data_roots("alice", s) == [alice.resolve(), (tmp_path / "shared").resolve()]
    assert confine("alice", "sub/a.csv", s) == (alice / "sub" / "a.csv").resolve()
    assert confine("alice", str(alice / "sub" / "a.csv"), s) == (alice / "sub" / "a.csv").resolve()
    assert confine("alice", "inside.csv", s) == (alice / "sub" / "a.csv").resolve()
    assert confine("alice", str(tmp_path / "shared"), s) == (tmp_path / "shared").resolve()
    assert confine("alice", "common.csv", s) == (tmp_path / "shared" / "common.csv").resolve()  # second root
    for bad in ("../bob/b.csv", "sub/../../bob/b.csv", str(tmp_path / "data" / "bob" / "b.csv"), "link.csv",
                "/etc/passwd", "", "a\x00b", "~/secret.csv", "~alice/x.csv"):
        with pytest.raises(AccessError):
            confine("alice", bad, s)
    with pytest.raises(AccessError):
        data_roots("../x", s)


def test_one_resolver_for_every_source(tmp_path: Path):
    s = _settings(tmp_path)
    (tmp_path / "data" / "alice").mkdir(parents=True)
    assert resolve_source("alice", "sklearn:digits", s) == "sklearn:digits"
    assert resolve_source("alice", "t.csv", s) == str((tmp_path / "data" / "alice" / "t.csv").resolve())
    with pytest.raises(AccessError, match="not a built-in dataset"):
        resolve_source("alice", "sklearn:nope", s)
    with pytest.raises(AccessError) as err:
        resolve_source("alice", "/proc/self/environ", s)
    assert "data.source" in str(err.value) and str((tmp_path / "data" / "alice").resolve()) in str(err.value)
    off = load_settings(_write(tmp_path / "off.toml", "[data]\nbuiltin_datasets = false\n"))
    with pytest.raises(AccessError, match="switched off"):
        resolve_source("alice", "sklearn:iris", off)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
