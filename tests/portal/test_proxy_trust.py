"""Header mode trusted by address alone (``trusted_proxies``, no secret), against the real portal
process: a local user who connects from loopback and names the proxy's address in
``X-Forwarded-For`` (which Streamlit's server takes as the client address on loopback connections)
is not signed in as anyone. The rules alone: tests/portal/test_users.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.portal.live_portal import live_portal, page_text

pytestmark = pytest.mark.slow


def test_a_local_user_cannot_pose_as_the_trusted_proxy_with_x_forwarded_for(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data}"]\n[auth]\nmode = "header"\n'
                      'trusted_proxies = ["10.0.0.5"]\nadmins = ["hpcadmin"]\n', encoding="utf-8")
    with live_portal(config, tmp_path / "home", tmp_path / "server.log") as port:
        forged = page_text(port, {"X-Forwarded-For": "10.0.0.5", "X-Remote-User": "hpcadmin"})
        assert "Signed in as" not in forged and "hpcadmin" not in forged
        assert "only the proxy secret proves a proxy on this machine" in forged
        # the same with the proxy's address among others, as a chain of proxies would send it
        chained = page_text(port, {"X-Forwarded-For": "192.0.2.7, 10.0.0.5", "X-Remote-User": "hpcadmin"})
        assert "Signed in as" not in chained
        plain = page_text(port, {"X-Remote-User": "hpcadmin"})
        assert "Signed in as" not in plain and "(loopback)" in plain


def test_started_as_portal_sh_starts_it_the_address_is_the_connections_own(tmp_path: Path):
    """scripts/portal.sh turns off the server's X-Forwarded-For rewriting: a forged header leaves
    the address loopback."""
    script = (Path(__file__).resolve().parents[2] / "scripts" / "portal.sh").read_text(encoding="utf-8")
    assert 'export FORWARDED_ALLOW_IPS=""' in script
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[data]\nroots = ["{data}"]\n[auth]\nmode = "header"\n'
                      'trusted_proxies = ["10.0.0.5"]\n', encoding="utf-8")
    with live_portal(config, tmp_path / "home", tmp_path / "server.log", env={"FORWARDED_ALLOW_IPS": ""}) as port:
        forged = page_text(port, {"X-Forwarded-For": "10.0.0.5", "X-Remote-User": "hpcadmin"})
        assert "Signed in as" not in forged and "this request came from this machine (loopback)" in forged
