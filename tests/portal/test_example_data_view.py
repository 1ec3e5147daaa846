"""The editor's "Generate example data": a template that needs data becomes runnable in the portal,
its source the written folder's absolute path under the user's data root; a user's own data is never
overwritten; without a data root the refusal names the setting that gives one."""

from __future__ import annotations

import json

from tests.portal.conftest import as_the_browser, downloaded, editor, messages, write_environments


def _load(at, name: str) -> None:
    at.selectbox(key="toolbar.template").set_value(name).run()
    as_the_browser(at, at.button(key="toolbar.load").click)


def _generate(at) -> None:
    as_the_browser(at, at.button(key="editor.example_data").click)


def _offered(at) -> bool:
    return any(b.key == "editor.example_data" for b in at.button)


def test_an_imagenet_template_runs_once_its_example_data_is_generated(app, portal_env, downloads):
    at = app()
    _load(at, "alexnet")
    assert any("Needs your data" in w.value for w in at.warning)
    _generate(at)
    folder = (portal_env / "data" / "imagenet" / "train").resolve()
    assert len(list(folder.glob("class*/*.jpg"))) == 1000  # at least one image per class, 224×224
    assert len([p for p in folder.iterdir() if p.is_dir()]) == 1000
    shown = messages(at)
    assert not any("Needs your data" in m for m in shown) and not _offered(at)
    # valid, and runnable once fitted to this machine (alexnet asks for 2 nodes × 4 GPUs)
    assert any(m.startswith("Valid, but local has") for m in shown), shown
    [note] = [s.value for s in at.success if s.value.startswith("Generated example data")]
    assert f"in {folder}" in note and "1,000 JPEG images in 1000 class folders (224×224), 1,000 files, " in note
    assert " MB" in note
    # the data layer's form, the editor's spec and the exported file name the same absolute source
    assert any(c.value == f"Current source: `{folder}`" for c in at.caption)
    data = editor(at).spec().data
    assert (data.source, data.size, data.num_classes) == (str(folder), 1000, 1000)
    exported = json.loads(downloaded(at, downloads, "Export spec (JSON)"))
    assert exported["data"]["source"] == str(folder)
    at.switch_page("pages/runs.py").run()
    assert any(b.key == "runs.submit" for b in at.button), "a pipeline with its data can be submitted"


def test_a_folder_that_is_not_example_data_is_never_overwritten(app, portal_env):
    at = app()
    _load(at, "resnet18_cifar")
    assert _offered(at)
    mine = portal_env / "data" / "cifar10" / "train" / "cat"  # the user's data arrives before the click
    mine.mkdir(parents=True)
    (mine / "tabby.png").write_bytes(b"not an example")
    _generate(at)
    [refusal] = [e.value for e in at.error if e.value.startswith("Could not generate example data")]
    assert f"{mine.parent} already exists and is not FlowTrain example data; it is left as it is" in refusal
    assert sorted(p.name for p in mine.parent.rglob("*")) == ["cat", "tabby.png"]
    assert editor(at).spec().data.source == "cifar10/train"  # the source is left as it was


def test_without_a_data_root_the_refusal_names_the_setting(app, portal_env):
    envs = write_environments(portal_env / "environments.json")
    (portal_env / "flowtrain.toml").write_text(
        f'home = "{portal_env / "home"}"\nenvironments_file = "{envs}"\n[data]\nroots = []\n', encoding="utf-8")
    at = app()
    _load(at, "lstm_text_classifier")
    assert any("Needs your data" in w.value for w in at.warning)
    _generate(at)
    [refusal] = [e.value for e in at.error if e.value.startswith("Could not generate example data")]
    assert "no data roots are configured for you" in refusal and "[data] roots" in refusal
    assert any("Needs your data" in w.value for w in at.warning)
    assert editor(at).spec().data.source == "text/reviews.csv"
    assert not list(portal_env.rglob("reviews.csv"))


def test_a_marker_planted_in_the_data_folder_deletes_nothing_of_the_service(app, portal_env):
    """The audit's case: a marker naming the service home's flowtrain.db through a link planted in the
    data folder; Generate example data deleted the registry. FlowTrain's record of what it wrote lies in
    the home now, and nothing is deleted through a link."""
    at = app()
    _load(at, "resnet18_cifar")
    assert _offered(at)
    db = portal_env / "home" / "flowtrain.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    if not db.exists():
        db.write_bytes(b"the registry")
    before = db.read_bytes()
    folder = portal_env / "data" / "cifar10" / "train"
    folder.mkdir(parents=True)
    (folder / "svc").symlink_to(portal_env / "home")
    (folder / ".flowtrain-example-data.json").write_text(
        json.dumps({"written_by": "FlowTrain example data", "files": ["svc/flowtrain.db"]}), encoding="utf-8")
    _generate(at)
    [refusal] = [e.value for e in at.error if e.value.startswith("Could not generate example data")]
    assert "already exists and is not FlowTrain example data" in refusal
    assert db.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == [".flowtrain-example-data.json", "svc"]


def test_the_record_of_generated_data_lies_in_the_home_not_in_the_data_folder(app, portal_env):
    at = app()
    _load(at, "lstm_text_classifier")
    _generate(at)
    csv = (portal_env / "data" / "text" / "reviews.csv").resolve()
    [record] = (portal_env / "home" / "example-data").glob("*.json")
    assert str(csv) in json.loads(record.read_text(encoding="utf-8"))["written"]
    assert sorted(p.name for p in csv.parent.iterdir()) == ["reviews.csv"]  # no marker in the data folder
