"""AppTest fixtures: the real app.py with its own settings file, home and data root in tmp_path."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from portal.editor_state import Editor
from portal.forms import wkey

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


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """What the page's download buttons serve: media URL → bytes, recorded as AppTest stores them."""
    served: dict[str, bytes] = {}

    class Recording(MemoryMediaFileStorage):
        def load_and_get_id(self, path_or_data: str | bytes, mimetype: str, kind: Any,
                            filename: str | None = None) -> str:
            file_id = super().load_and_get_id(path_or_data, mimetype, kind, filename)
            served[self.get_url(file_id)] = self.get_file(file_id).content
            return file_id

    monkeypatch.setattr("streamlit.testing.v1.app_test.MemoryMediaFileStorage", Recording)
    return served


def downloaded(at: AppTest, served: dict[str, bytes], label: str) -> bytes:
    """The bytes the download button labelled ``label`` gives (it must be enabled)."""
    [button] = [b for b in at.get("download_button") if b.proto.label == label]
    assert not button.proto.disabled, f"{label!r} is disabled"
    return served[button.proto.url]


# Widgets that hold a value the browser keeps between reruns.
VALUE_WIDGETS = ("number_input", "text_input", "text_area", "selectbox", "multiselect", "checkbox", "toggle", "radio")


_UNSEEN = object()


def as_the_browser(at: AppTest, action: Callable[[], Any]) -> None:
    """Do ``action`` (a click, a value set), run, then run once more as a browser would.

    A browser keeps the value it shows for every widget whose id it still knows, even when the
    script drew that widget with another initial value, and sends that value with the next
    interaction; AppTest reads values from the session instead. So after the run, every widget
    whose id survived gets back the value it showed before (a change, so its callback fires as in
    the browser), and the app runs again.
    """
    action()
    shown = {w.id: w.value for kind in VALUE_WIDGETS for w in at.get(kind)}  # with the user's change
    at.run()
    assert_no_exception(at)
    for kind in VALUE_WIDGETS:
        for w in at.get(kind):
            old = shown.get(w.id, _UNSEEN)
            if old is _UNSEEN or w.value == old:
                continue
            options = getattr(w, "options", None)
            if options is not None and any(v not in options for v in (old if isinstance(old, list) else [old])
                                           if v is not None):
                continue  # the browser cannot show an option the widget no longer has
            w.set_value(old)
    at.run()
    assert_no_exception(at)


def assert_no_exception(at: AppTest) -> None:
    if at.exception:
        raise AssertionError("the page raised:\n" + "\n\n".join(
            e.message + "\n" + "\n".join(e.stack_trace or []) for e in at.exception))


def editor(at: AppTest) -> Editor:
    return at.session_state["portal.editor"]


def form(at: AppTest, kind: str, base: str) -> Any:
    """The widget of kind ``kind`` (``number_input``, ``selectbox``…) showing the document's field
    ``base`` (``data.batch_size``, ``param.conv1.out_channels``): its key carries the form version."""
    return getattr(at, kind)(key=wkey(editor(at), base))


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
