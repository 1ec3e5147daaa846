"""The canvas component as the portal serves it (portal/flow_component.py): the installed build, unchanged but for
one script in its page, made once; a cache folder that cannot be written is a message, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import FlowTrainError
from portal.flow_component import CLICK_SCRIPT, MAIN_SCRIPT_TAG, SOURCE, served_build


def test_the_served_build_is_the_installed_one_with_the_click_script_before_the_bundle(tmp_path: Path):
    folder = served_build(tmp_path)
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert page.index(CLICK_SCRIPT) < page.index(MAIN_SCRIPT_TAG), "the script must run before the deferred bundle"
    assert page.replace(CLICK_SCRIPT, "") == (SOURCE / "index.html").read_text(encoding="utf-8")
    [bundle] = (SOURCE / "static" / "js").glob("main.*.js")
    assert (folder / "static" / "js" / bundle.name).read_bytes() == bundle.read_bytes()
    made = (folder / "index.html").stat().st_mtime_ns
    assert served_build(tmp_path) == folder and (folder / "index.html").stat().st_mtime_ns == made, "made once"
    assert [p.name for p in tmp_path.iterdir()] == [folder.name], "no half-made copy left beside it"


def test_a_cache_folder_that_cannot_be_written_is_a_message_naming_it(tmp_path: Path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder should be")
    with pytest.raises(FlowTrainError, match=r"Could not prepare the canvas component in .*cache.*XDG_CACHE_HOME"):
        served_build(blocked)
