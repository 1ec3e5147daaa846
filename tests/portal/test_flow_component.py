"""The canvas component as the portal serves it (portal/flow_component.py): the installed build with one script in its
page and its bundle patched where the portal says (under a name of its own), made once; a build that is not the one
the portal was written for, and a cache folder that cannot be written, are messages, not tracebacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.errors import FlowTrainError
from portal import flow_component
from portal.flow_component import BUNDLE_PATCHES, CLICK_SCRIPT, MAIN_SCRIPT_TAG, SOURCE, served_build


def test_the_served_build_is_the_installed_one_with_the_click_script_and_the_patched_bundle(tmp_path: Path):
    folder = served_build(tmp_path)
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert page.index(CLICK_SCRIPT) < page.index(MAIN_SCRIPT_TAG), "the script must run before the deferred bundle"
    [bundle] = (SOURCE / "static" / "js").glob("main.*.js")
    [served] = re.findall(r'src="\./static/js/(main\.[0-9a-f]+\.ft[0-9a-f]+\.js)"', page)
    assert page.replace(CLICK_SCRIPT, "").replace(served, bundle.name) == (SOURCE / "index.html").read_text("utf-8")
    expected = bundle.read_text(encoding="utf-8")
    for old, new in BUNDLE_PATCHES:
        expected = expected.replace(old, new)
    assert expected != bundle.read_text(encoding="utf-8")
    assert (folder / "static" / "js" / served).read_text(encoding="utf-8") == expected, "the bundle, patched: no more"
    made = (folder / "index.html").stat().st_mtime_ns
    assert served_build(tmp_path) == folder and (folder / "index.html").stat().st_mtime_ns == made, "made once"
    assert [p.name for p in tmp_path.iterdir()] == [folder.name], "no half-made copy left beside it"


def test_a_cache_folder_that_cannot_be_written_is_a_message_naming_it(tmp_path: Path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder should be")
    with pytest.raises(FlowTrainError, match=r"Could not prepare the canvas component in .*cache.*XDG_CACHE_HOME"):
        served_build(blocked)


def test_a_bundle_without_the_code_the_portal_patches_is_a_message_naming_the_version_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(flow_component, "BUNDLE_PATCHES", (("code no build holds", ""),))
    with pytest.raises(FlowTrainError, match=r"holds 0 times, not once.*pip install -r requirements.txt"):
        served_build(tmp_path)
