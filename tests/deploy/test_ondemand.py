"""The Open OnDemand app (deploy/ondemand/flowtrain), as far as this machine allows without OnDemand.

What OnDemand would do is done by hand, for real: Debian's ``ruby`` renders the app's ERB files with
the variables OnDemand passes (the form's attributes; host, port and password for the view); the
rendered ``before.sh`` and ``script.sh`` run inside a batch job of the dev cluster, wrapped the way
OnDemand's "basic" template wraps them, with the ``sbatch`` options of the rendered
``submit.yml``; Debian's ``nginx`` proxies ``/rnode/<host>/<port>/`` to the node with the prefix
stripped, as OnDemand's proxy does. In chromium, the Connect button of the rendered view opens the
editor under that prefix, a run submitted from it completes on Slurm, and a request without the
session secret is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, browser  # noqa: F401  (fixture)
from tests.browser.ui import RUN_COUNTER, act, choose, click_button, set_number, shot, wait_node, wait_text
from tests.helpers import wait_until
from tests.slurm_fixture import TEST_JOB_PREFIX, DevCluster, in_ci

pytestmark = [pytest.mark.ondemand, pytest.mark.slurm, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "deploy" / "ondemand" / "flowtrain"
CANVAS = 'iframe[title="portal.flow_component.streamlit_flow"]'
RUN_TIMEOUT_MS = 360_000

# Renders one ERB file with the given variables (as OnDemand does: trim mode "-", the variables as
# methods); with "yaml", parses the result and prints it as JSON (submit.yml).
RENDER_RB = r"""
require "erb"; require "json"; require "yaml"; require "shellwords"
vars = JSON.parse(ARGV[1])
ctx = Object.new
vars.each { |k, v| ctx.define_singleton_method(k) { v } }
out = ERB.new(File.read(ARGV[0]), trim_mode: "-").result(ctx.instance_eval { binding })
if ARGV[2] == "yaml" then puts JSON.generate(YAML.safe_load(out)) else print out end
"""
FORM_DEFAULTS_RB = r"""
require "yaml"; require "json"
form = YAML.safe_load(File.read(ARGV[0]))
puts JSON.generate(form["attributes"].transform_values { |a| a.is_a?(Hash) ? a["value"] : a })
"""

# What OnDemand's "basic" template does around before.sh and script.sh (reduced to what they use):
# its helpers, the node's address as host, connection.yml for the view.
WRAPPER = """#!/bin/bash
set -e
host=127.0.0.1  # the node's address: the dev cluster's nodes all live on this host
find_port() { python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$1"; }
create_passwd() { tr -cd 'a-zA-Z0-9' < /dev/urandom 2> /dev/null | head -c"${1:-8}"; }
source ./before.sh
printf 'host: %s\\nport: %s\\npassword: %s\\n' "$host" "$port" "$password" > connection.yml
exec bash ./script.sh
"""

NGINX_CONF = """user root;
worker_processes 1;
error_log {root}/error.log;
pid {root}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log {root}/access.log;
  client_body_temp_path {root}/body; proxy_temp_path {root}/proxy; fastcgi_temp_path {root}/fcgi;
  uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  server {{
    listen 127.0.0.1:{port};
    location /session/ {{ alias {root}/session/; }}
    # OnDemand's relative route: /rnode/<host>/<port>/<path> reaches http://<host>:<port>/<path>.
    location ~ ^/rnode/[^/]+/\\d+$ {{ return 301 $uri/$is_args$args; }}
    location ~ ^/rnode/(?<node>[^/]+)/(?<nport>\\d+)(?<rest>/.*)$ {{
      proxy_pass http://$node:$nport$rest$is_args$args;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header Host $host;
      proxy_read_timeout 3600s;
    }}
  }}
}}
"""


def ruby(script: str, *args: str) -> str:
    if shutil.which("ruby") is None:
        message = "Debian's ruby renders the OnDemand app's ERB files: apt-get install ruby (scripts/setup.sh --test)"
        pytest.fail(message) if in_ci() else pytest.skip(message)
    out = subprocess.run(["ruby", "-e", script, *args], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def render(name: str, variables: dict[str, Any], *mode: str) -> str:
    return ruby(RENDER_RB, str(APP / name), json.dumps(variables), *mode)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def session(slurm_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The app's session job running on the dev cluster and nginx in front of it."""
    root = tmp_path_factory.mktemp("ondemand")
    form = json.loads(ruby(FORM_DEFAULTS_RB, str(APP / "form.yml")))
    form.update(partition="cpu", cores=2, memory_gb=2, account="ml" if "dbd" in slurm_cluster.extras else "",
                flowtrain_root=str(REPO), bc_num_hours=1)
    submit = json.loads(render("submit.yml.erb", form, "yaml"))
    assert submit["batch_connect"]["template"] == "basic"
    native = submit["script"]["native"]
    assert "--partition=cpu" in native and "--cpus-per-task=2" in native and "--mem=2G" in native
    job_dir = root / "session"
    job_dir.mkdir()
    (job_dir / "before.sh").write_text(render("template/before.sh.erb", form))
    (job_dir / "script.sh").write_text(render("template/script.sh.erb", form))
    (job_dir / "job.sh").write_text(WRAPPER)
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(HOME=str(home), SLURM_CONF=slurm_cluster.slurm_conf)
    sbatch = ["sbatch", "--parsable", *native, f"--time={int(form['bc_num_hours']) * 60}",
              f"--job-name={TEST_JOB_PREFIX}-ondemand", f"--chdir={job_dir}", f"--output={job_dir}/output.log",
              str(job_dir / "job.sh")]
    out = subprocess.run(sbatch, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().split(";")[0]
    nginx = None
    try:
        conn = job_dir / "connection.yml"
        wait_until(conn.is_file, timeout=60, message=lambda: f"connection.yml; job log: {_log(job_dir)}")
        info = dict(line.split(": ", 1) for line in conn.read_text().splitlines())

        def listening() -> bool:
            job = slurm_cluster.commands.show_job(job_id)
            assert job is not None and not job.state.is_final, f"the session job ended: {job}; log: {_log(job_dir)}"
            return _answers(info["host"], int(info["port"]))

        wait_until(listening, timeout=120,
                   message=lambda: f"the portal to listen on {info['host']}:{info['port']}; job log: {_log(job_dir)}")
        view = render("view.html.erb", {"host": info["host"], "port": info["port"], "password": info["password"]})
        (job_dir / "view.html").write_text(f"<!doctype html><html><body>{view}</body></html>")
        port = free_port()
        (root / "nginx.conf").write_text(NGINX_CONF.format(root=root, port=port))
        nginx = subprocess.Popen(["nginx", "-c", str(root / "nginx.conf"), "-g", "daemon off;"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: _answers("127.0.0.1", port) or nginx.poll() is not None, timeout=20, message="nginx")
        assert nginx.poll() is None, nginx.stderr.read().decode() if nginx.stderr else ""
        yield {"nginx": f"http://127.0.0.1:{port}", "view": view, **info, "job_dir": job_dir, "job_id": job_id}
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(timeout=20)
        slurm_cluster.commands.scancel(job_id)


def _answers(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _log(job_dir: Path) -> str:
    log = job_dir / "output.log"
    return log.read_text()[-2000:] if log.is_file() else "(none yet)"


def test_the_view_connects_under_the_rnode_prefix_with_the_secret(session: dict[str, Any]) -> None:
    action = re.search(r'action="([^"]+)"', session["view"])
    secret = re.search(r'name="secret" value="([^"]+)"', session["view"])
    assert action and action.group(1) == f"/rnode/{session['host']}/{session['port']}/"
    assert secret and secret.group(1) == session["password"] and len(session["password"]) == 32
    settings = (session["job_dir"] / "flowtrain.toml").read_text()
    assert 'mode = "session"' in settings and (session["job_dir"] / "flowtrain-secret").stat().st_mode & 0o077 == 0


def test_editor_loads_under_the_prefix_and_a_run_completes(session: dict[str, Any], browser: Any) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1600, "height": 1300})
    context.add_init_script(RUN_COUNTER)
    view = context.new_page()
    OPEN_PAGES.append(view)
    view.goto(f"{session['nginx']}/session/view.html")
    with context.expect_page() as opened:
        view.get_by_role("button", name="Connect to FlowTrain").click()
    page = opened.value
    OPEN_PAGES.append(page)
    assert page.url.startswith(f"{session['nginx']}/rnode/{session['host']}/{session['port']}/?secret=")
    wait_node(page, "input", timeout=120_000)
    wait_text(page, re.compile(r"Signed in as \S+ · scheduler: slurm"))
    choose(page, "Template from the model zoo", "mlp")
    click_button(page, "Load template")
    wait_node(page, "output")
    set_number(page, "Epochs", 1)
    act(page, page.get_by_role("link", name="Runs").click)
    assert "/rnode/" in page.url
    act(page, page.get_by_role("button", name="Submit run").click, timeout=300_000)
    label = wait_text(page, re.compile(r"^Submitted run \S+: \w+ on slurm")).inner_text()
    run_id = re.search(r"Submitted run (\S+):", label).group(1)  # type: ignore[union-attr]
    wait_text(page, re.compile(rf"Run {re.escape(run_id)} — COMPLETED"), timeout=RUN_TIMEOUT_MS)
    shot(page, ARTIFACTS, "ondemand-run-completed")
    context.close()


def test_a_request_without_the_session_secret_is_refused(session: dict[str, Any], browser: Any) -> None:  # noqa: F811
    context = browser.new_context()
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    page.goto(f"{session['nginx']}/rnode/{session['host']}/{session['port']}/")
    wait_text(page, re.compile(r"no valid session secret"), exact=False)
    assert page.locator(CANVAS).count() == 0
    page.goto(f"{session['nginx']}/rnode/{session['host']}/{session['port']}/?secret=" + "x" * 32)
    wait_text(page, re.compile(r"no valid session secret"), exact=False)
    assert page.locator(CANVAS).count() == 0
    context.close()
