"""The Open OnDemand app's ``before.sh``, rendered by Debian's ruby as OnDemand renders it and run by
bash as OnDemand's "basic" template runs it (no cluster needed): a form value stays text in the
session's settings file, and the session secret does not reach the portal's environment. The whole
app on the dev cluster behind nginx: tests/deploy/test_ondemand.py."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from settings import load_settings
from tests.deploy.test_ondemand import APP, FORM_DEFAULTS_RB, render, ruby

pytestmark = pytest.mark.ondemand

# The basic template's steps around before.sh (as in test_ondemand.WRAPPER), with script.sh replaced
# by a dump of the environment the portal would start with.
WRAPPER = """#!/bin/bash
set -e
host=127.0.0.1
find_port() { echo 18999; }
create_passwd() { tr -cd 'a-zA-Z0-9' < /dev/urandom 2> /dev/null | head -c"${1:-8}"; }
source ./before.sh
printf 'host: %s\\nport: %s\\npassword: %s\\n' "$host" "$port" "$password" > connection.yml
exec env -0 > portal-environment
"""


def test_a_form_value_stays_text_and_the_secret_stays_out_of_the_portals_environment(tmp_path: Path) -> None:
    marker = tmp_path / "expanded"
    hostile = f'envs-$(touch {marker})-`touch {marker}`-${{HOME}}-"q"\\b.toml'
    form = json.loads(ruby(FORM_DEFAULTS_RB, str(APP / "form.yml")))
    form.update(flowtrain_environment=hostile, flowtrain_root="/opt/flowtrain")
    session = tmp_path / "session"
    session.mkdir()
    (session / "before.sh").write_text(render("template/before.sh.erb", form), encoding="utf-8")
    (session / "job.sh").write_text(WRAPPER, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    out = subprocess.run(["bash", "job.sh"], cwd=session, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert not marker.exists(), "bash expanded the form value in before.sh"

    config = session / "flowtrain.toml"
    assert tomllib.loads(config.read_text(encoding="utf-8"))["environments_file"] == hostile
    portal_env = dict(item.split("=", 1) for item in (session / "portal-environment").read_text().split("\0") if item)
    connection = dict(line.split(": ", 1) for line in (session / "connection.yml").read_text().splitlines())
    secret = (session / "flowtrain-secret").read_text()
    assert len(secret) == 32 and connection["password"] == secret  # the Connect button still gets it
    assert "password" not in portal_env and secret not in "".join(portal_env.values())
    assert portal_env["FLOWTRAIN_CONFIG"] == str(config) and portal_env["FLOWTRAIN_HOME"] == str(home / "flowtrain")
    assert (portal_env["host"], portal_env["port"]) == ("127.0.0.1", "18999")  # what script.sh uses

    environments = session / hostile  # relative to the settings file; made so that it loads
    environments.parent.mkdir(parents=True)
    environments.write_text('[[environments]]\nname = "e"\npython = "/usr/bin/python3"\n', encoding="utf-8")
    settings = load_settings(config, environ={"FLOWTRAIN_HOME": portal_env["FLOWTRAIN_HOME"]})
    assert settings.auth.mode == "session" and settings.auth.secret_file == session / "flowtrain-secret"
    assert settings.home == home / "flowtrain" and settings.scheduler == "slurm"
