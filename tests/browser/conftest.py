"""Real-browser fixtures: the portal served by ``streamlit run serve.py`` (app.py's pages and the portal's
upload route) on a free port, and Debian's chromium driven by Playwright (``apt-get install -y chromium``;
never ``playwright install``).

The server runs with its own settings file (users from the trusted ``X-Remote-User`` header, as
behind Open OnDemand), FLOWTRAIN_HOME in a temporary folder, and is stopped after the module.
Screenshots and the server logs go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import empty_screenshots, wait_until

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
USER_HEADER = "X-Remote-User"
SECRET_HEADER = "X-FlowTrain-Proxy-Secret"  # what the sign-in proxy adds (settings: auth.proxy_secret_file)
PROXY_SECRET = "browser-test-proxy-secret-0123456789"


@dataclass(frozen=True)
class Portal:
    url: str
    home: Path
    data: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """The screenshot folder, emptied once per session (each module starts its own portal). Under
    pytest-xdist the run's controller empties it before the workers start (tests/conftest.py): a worker
    emptying it would delete the screenshots its sibling already took."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        empty_screenshots(ARTIFACTS)
    return ARTIFACTS


@pytest.fixture(scope="module")
def portal(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           artifacts: Path) -> Iterator[Portal]:
    root = tmp_path_factory.mktemp("portal")
    home, data = root / "home", root / "data"
    data.mkdir()
    config = root / "flowtrain.toml"
    secret = root / "proxy.secret"
    secret.write_text(PROXY_SECRET + "\n", encoding="utf-8")
    secret.chmod(0o600)
    config.write_text(f'home = "{home}"\n[data]\nroots = ["{data}"]\n[auth]\nmode = "header"\n'
                      f'header = "{USER_HEADER}"\nproxy_secret_file = "{secret}"\n', encoding="utf-8")
    # One portal per test module, its log named for the module: a tmp folder's name ("portal0") repeats
    # in each pytest-xdist worker, and two workers' portals would write one log.
    log = artifacts / f"server-{request.module.__name__.rsplit('.', 1)[-1]}.log"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_CONFIG=str(config), FLOWTRAIN_HOME=str(home))
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _answers(port) or proc.poll() is not None, timeout=60,
                   message="the portal server to listen")
        if proc.poll() is not None:
            raise AssertionError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        yield Portal(f"http://127.0.0.1:{port}", home, data, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        raise AssertionError(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); "
                             "scripts/setup.sh --test does it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


OPEN_PAGES: list[object] = []  # pages of the running test: screenshotted when it fails


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for i, page in enumerate(OPEN_PAGES):
            try:
                page.screenshot(path=str(ARTIFACTS / f"failure-{item.name}-{i}.png"))  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - a closed page: say so, keep the test's own error
                print(f"no failure screenshot of page {i}: {exc}")
    if report.when == "teardown":
        OPEN_PAGES.clear()
