"""Every zoo template runs as shipped or its data layer says "needs your data" and what to point it
at; "Valid" means runnable, so a pipeline whose data is missing is never called valid."""

from __future__ import annotations

import pytest

from core import datasets, zoo
from portal.data_needs import wanted
from tests.portal.conftest import as_the_browser, editor, messages


def _load(at, name: str) -> None:
    at.selectbox(key="toolbar.template").set_value(name).run()
    as_the_browser(at, at.button(key="toolbar.load").click)


@pytest.mark.parametrize("name", [e.name for e in zoo.entries()])
def test_a_template_runs_as_shipped_or_asks_for_its_data(app, name):
    at = app()
    _load(at, name)
    data = zoo.template(name).data
    shown = messages(at)
    if datasets.builtin(data.source):
        assert any(m.startswith("Valid:") for m in shown), shown
        assert not any("Needs your data" in m for m in shown)
        return
    [need] = [w.value for w in at.warning if "Needs your data" in w.value]
    assert f"`{data.source}`" in need and wanted(data.model_dump(mode="json")) in need
    assert not any(m.startswith("Valid") for m in shown), "a pipeline without its data is not valid"
    assert any(m.startswith("Not runnable yet: the data layer needs your data") for m in shown)
    at.switch_page("pages/runs.py").run()
    assert not [b for b in at.button if b.key == "runs.submit"], "no Submit for a pipeline without its data"
    assert any("needs your data" in w.value for w in at.warning)


def test_what_to_point_at_is_said_in_the_pipelines_own_terms():
    assert wanted(zoo.template("resnet18_cifar").data.model_dump(mode="json")) == \
        "a folder with one sub-folder of images (PNG or JPEG) per class (10 classes) of 32×32 pixels"
    assert wanted(zoo.template("alexnet").data.model_dump(mode="json")).endswith("(1000 classes), resized to 224×224")
    assert wanted(zoo.template("lstm_text_classifier").data.model_dump(mode="json")) == \
        "a CSV table with the label column 'label' and the text column 'text' (2 classes)"


def test_the_template_becomes_valid_once_its_data_is_there(app, portal_env):
    at = app()
    _load(at, "resnet18_cifar")
    assert any("Needs your data" in w.value for w in at.warning)
    (portal_env / "data" / "cifar10" / "train" / "cat").mkdir(parents=True)
    at.run()
    assert not any("Needs your data" in w.value for w in at.warning)
    if not any(m.startswith("Valid: 69 nodes") for m in messages(at)):  # 1 GPU, 8 CPUs: more than this machine has
        assert any(m.startswith("Valid, but local has") for m in messages(at))
        as_the_browser(at, at.button(key="editor.fit_resources").click)
    assert any(m.startswith("Valid: 69 nodes") for m in messages(at))
    assert editor(at).spec().data.source == "cifar10/train"
