"""AppTest fixtures: the real app.py with its own settings file, home and data root in tmp_path."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from portal.editor_state import Editor

APP = Path(__file__).resolve().parents[2] / "app.py"
TIMEOUT_S = 60


def write_environments(path: Path, frameworks: list[str] | None = None) -> Path:
    """An environments file declaring this interpreter's frameworks (no probing: instant discovery)."""
    import importlib.metadata as md

    dists = {"torch": "torch", "keras": "keras", "paddle": "paddlepaddle"}
    fws = {fw: {"version": md.version(dists[fw]), "device": "cpu"} for fw in (frameworks or list(dists))}
    path.write_text(json.dumps({"environments": [{"name": "default", "python": sys.executable, "frameworks": fws}]}),
                    encoding="utf-8")
    return path


@pytest.fixture
def portal_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settings file (local mode, one data root, declared frameworks), FLOWTRAIN_HOME/CONFIG for this test."""
    data = tmp_path / "data"
    data.mkdir()
    envs = write_environments(tmp_path / "environments.json")
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\nenvironments_file = "{envs}"\n[data]\nroots = ["{data}"]\n',
                      encoding="utf-8")
    monkeypatch.setenv("FLOWTRAIN_CONFIG", str(config))
    monkeypatch.setenv("FLOWTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FLOWTRAIN_ENVIRONMENTS", raising=False)  # the portal sets it; undone after the test
    monkeypatch.delenv("FLOWTRAIN_SCHEDULER", raising=False)
    return tmp_path


@pytest.fixture
def app(portal_env: Path) -> Callable[..., AppTest]:
    def start(page: str | None = None) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
        at.run()
        if page:
            at.switch_page(page).run()
        assert_no_exception(at)
        return at

    return start


def assert_no_exception(at: AppTest) -> None:
    if at.exception:
        raise AssertionError("the page raised:\n" + "\n\n".join(
            e.message + "\n" + "\n".join(e.stack_trace or []) for e in at.exception))


def editor(at: AppTest) -> Editor:
    return at.session_state["portal.editor"]


def canvas_args(at: AppTest) -> dict[str, Any]:
    """What Python last sent to the canvas component (exactly one canvas must be on the page)."""
    comps = [c for c in at.get("component_instance") if "streamlit_flow" in c.proto.component_name]
    assert len(comps) == 1, f"expected one canvas, found {len(comps)}"
    return json.loads(comps[0].proto.json_args)


def fake_canvas_event(at: AppTest, nodes: list[dict[str, Any]] | None = None,
                      edges: list[dict[str, Any]] | None = None, selected: str | None = None) -> None:
    """Send what the browser would: the component's value under the current canvas key, then rerun."""
    sent = canvas_args(at)
    ed = editor(at)
    value = {
        "nodes": nodes if nodes is not None else sent["nodes"],
        "edges": edges if edges is not None else sent["edges"],
        "selectedId": selected,
        "timestamp": max(ed.canvas_ts, ed.last_event_ts or 0) + 1,  # newer than anything seen
    }
    at.session_state[ed.canvas_key] = value
    at.run()
    assert_no_exception(at)


def edge(source: str, target: str) -> dict[str, Any]:
    return {"id": f"st-flow-edge_{source}-{target}", "source": source, "target": target}


def messages(at: AppTest) -> list[str]:
    return [e.value for e in at.error] + [w.value for w in at.warning] + [i.value for i in at.info] + \
        [s.value for s in at.success]
