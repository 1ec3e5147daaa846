""""Try the model" on a completed run's page (AppTest on the real app.py).

The runs are completed without training: the spec's torch program is generated into the run folder
(its data.py is what preprocesses) and its ``model.onnx`` is exported from random canonical weights,
so the page's prediction can be checked against :mod:`core.prediction` run directly, and the bad
inputs against their messages, in seconds.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_digits

from core import zoo
from core.codegen import generate
from core.example_data import record_path, write_example_data
from core.load import spec_from_dict
from core.onnx_export import export_onnx, save_onnx
from core.prediction import activation_of, interpret, onnx_outputs, prepare_inputs
from core.validate import validate
from core.weights import random_canonical
from portal.param_text import md_text
from portal.users import default_local_user
from schedulers.base import JobStatus, RunState
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from tests.cli.test_predict_text import small_text_spec
from tests.portal.conftest import assert_no_exception

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_cnn.json"


def completed_run(registry: RunRegistry, *, onnx: bool = True, user: str | None = None, classes: int = 10,
                  doc: dict[str, Any] | None = None, **data: object) -> Run:
    """examples/digits_cnn.json (``data`` overriding its data layer, ``classes`` outputs) or ``doc``,
    COMPLETED with a ``model.onnx`` of random weights (none with ``onnx=False``)."""
    if doc is None:
        doc = json.loads(EXAMPLE.read_text())
        next(n for n in doc["model"]["nodes"] if n["id"] == "fc2")["params"]["out_features"] = classes
    doc["data"].update(data)
    spec = spec_from_dict(doc)
    run = registry.create_run(user=user or default_local_user(), spec_json=spec.to_json(),
                              spec_hash=spec.spec_hash(), framework="torch", scheduler="local", name=spec.name)
    generate(spec, "torch").write(run.run_dir)
    analysis = validate(spec)
    if onnx:
        save_onnx(export_onnx(spec, random_canonical(analysis, 0), analysis=analysis), run.run_dir / "model.onnx")
    registry.mark_submitted(run.id, "1")
    registry.record_status(run.id, JobStatus(job_id="1", state=RunState.COMPLETED, exit_code=0))
    registry.record_export(run.id, onnx, "model.onnx written" if onnx else "model.onnx not written: no final model")
    return registry.get(run.id)


@pytest.fixture
def registry(portal_env: Path) -> RunRegistry:
    return RunRegistry(home=portal_env / "home")


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image.astype(np.uint8), mode="L").save(buf, format="PNG")
    return buf.getvalue()


def _open(app, run: Run):
    at = app("pages/runs.py")
    at.selectbox(key="runs.selected").set_value(run.id).run()
    assert_no_exception(at)
    return at


def _upload(at, run: Run, *files: tuple[str, bytes]):
    at.file_uploader(key=f"try.files.{run.id}").set_value([(n, b, "application/octet-stream") for n, b in files])
    at.run()
    at.button(key="try.predict").click().run()
    assert_no_exception(at)
    return at


def _top_table(at):
    [table] = [t.value for t in at.table if "probability" in t.value.columns]
    return table


def test_an_uploaded_array_shows_the_top_5_as_the_predict_command_computes_them(app, registry, tmp_path):
    run = completed_run(registry)
    images = load_digits().images[:3]
    at = _upload(_open(app, run), run, ("three.npy", _npy(images)))
    np.save(tmp_path / "three.npy", images)  # the same through core.prediction, as `predict` runs it
    inputs = prepare_inputs(run.run_dir, [tmp_path / "three.npy"], tmp_path)
    expected = interpret(onnx_outputs(run.run_dir / "model.onnx", inputs), inputs, top=5,
                         activation=activation_of(run.spec()))
    summary = next(d.value for d in at.dataframe if "class" in d.value.columns)
    assert list(summary["input"]) == ["three.npy[0]", "three.npy[1]", "three.npy[2]"]
    assert list(summary["class"]) == [p.classes[0][1] for p in expected]
    table = _top_table(at)  # the first sample in detail
    assert list(table["class"]) == [c for _, c, _ in expected[0].classes]
    assert np.allclose(table["probability"], [p for _, _, p in expected[0].classes], atol=1e-4)
    assert len(at.get("vega_lite_chart")) >= 1 and len(at.get("image")) == 1  # bar chart; the input as seen
    at.selectbox(key="try.sample").set_value(2).run()
    assert list(_top_table(at)["class"]) == [c for _, c, _ in expected[2].classes]


def test_picked_validation_samples_show_their_true_class(app, registry):
    run = completed_run(registry)
    at = _open(app, run)
    at.number_input(key="try.val_start").set_value(4)
    at.number_input(key="try.val_count").set_value(3)
    at.button(key="try.validation").click().run()
    assert_no_exception(at)
    summary = next(d.value for d in at.dataframe if "true class" in d.value.columns)
    assert list(summary["input"]) == ["validation sample 4", "validation sample 5", "validation sample 6"]
    data = load_digits()  # the run's own split: its data.py's seeded permutation
    spec = importlib.util.spec_from_file_location("try_data", run.run_dir / "data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.split_indices(len(data.target))["val"][4:7]
    assert list(summary["true class"]) == [str(t) for t in data.target[rows]]
    assert len(_top_table(at)) == 5
    assert any(md_text("3 sample(s) from the validation split (samples 4 to 6) through model.onnx") in c.value
               for c in at.caption)


BAD_UPLOADS = [
    ("flat.npy", _npy(np.zeros((2, 64))), "flat.npy: the array has shape (2, 64) but the model takes samples of shape"),
    ("rgb.npy", _npy(np.zeros((2, 3, 8, 8))), "rgb.npy: the samples have 3 channels"),
    ("words.npy", _npy(np.array([["a", "b"]])), "words.npy: the array holds <U1 values; expected numbers"),
    ("rows.csv", b"a,b\n1,2\n", "rows.csv: the feature columns pixel_0_0"),
    ("scan.png", _png(np.zeros((8, 8))), "scan.png: this run was trained on sklearn:digits (builtin), not on image"),
    ("lines.txt", b"a text\n", "lines.txt: this run was trained on sklearn:digits (builtin) without a tokenize step"),
]


def test_a_bad_upload_is_one_message_naming_the_file(app, registry):
    run = completed_run(registry)
    at = _open(app, run)
    for name, content, expected in BAD_UPLOADS:
        at = _upload(at, run, (name, content))
        [error] = [e.value for e in at.error]
        assert md_text(expected) in error, error  # shown as literal text
        assert "Traceback" not in error and "flowtrain-try-" not in error  # the file by its name, not the temp path


def test_a_corrupt_image_names_the_file(app, registry, portal_env):
    folder = portal_env / "data" / "two"
    for label in ("a", "b"):
        (folder / label).mkdir(parents=True)
        for i in range(5):
            (folder / label / f"{i}.png").write_bytes(_png(np.full((8, 8), 40 * i)))
    run = completed_run(registry, source=str(folder), format="image_folder", input_shape=[1, 28, 28], num_classes=2, classes=2,
                        preprocessing=[{"op": "resize", "size": [28, 28]}, {"op": "scale"}, {"op": "normalize"}])
    at = _upload(_open(app, run), run, ("good.png", _png(np.full((8, 8), 90))), ("scan.png", b"\x89PNG\r\n\x1a\n cut"))
    [error] = [e.value for e in at.error]
    assert error.startswith(md_text("scan.png: cannot read the image")), error
    at = _upload(at, run, ("good.png", _png(np.full((8, 8), 90))))
    assert not at.error and set(_top_table(at)["class"]) == {"a", "b"}  # class names from the folders
    assert any(md_text("scale (step 2), normalize (step 3) recomputed") in c.value for c in at.caption)


def test_text_lines_of_a_text_run_are_tokenized_as_predict_does(app, registry, portal_env, tmp_path):
    """The zoo's LSTM text classifier (small, untrained): a .txt upload, one text per line."""
    write_example_data(zoo.template("lstm_text_classifier"), portal_env / "data",
                       record=record_path(portal_env / "home", "me"), samples=60)
    run = completed_run(registry, doc=small_text_spec(), source=str(portal_env / "data" / "text" / "reviews.csv"))
    lines = b"good great plot\r\nawful poor music\nan unseen word\n"
    at = _upload(_open(app, run), run, ("reviews.txt", lines))
    (tmp_path / "reviews.txt").write_bytes(lines)
    inputs = prepare_inputs(run.run_dir, [tmp_path / "reviews.txt"], tmp_path)
    expected = interpret(onnx_outputs(run.run_dir / "model.onnx", inputs), inputs, top=5,
                         activation=activation_of(run.spec()))
    summary = next(d.value for d in at.dataframe if "class" in d.value.columns)
    assert list(summary["input"]) == ["reviews.txt line 1", "reviews.txt line 2", "reviews.txt line 3"]
    assert list(summary["class"]) == [p.classes[0][1] for p in expected]
    assert set(_top_table(at)["class"]) == {"class0", "class1"} and not at.get("image")  # no picture of a text
    assert any(md_text("statistics of tokenize (step 1) recomputed") in c.value for c in at.caption)
    for name, content, message in [("gap.txt", b"one\n\nthree\n", "gap.txt line 2: an empty line"),
                                   ("photo.txt", _png(np.zeros((8, 8))), "photo.txt line 1: not UTF-8 text")]:
        at = _upload(at, run, (name, content))
        [error] = [e.value for e in at.error]
        assert md_text(message) in error and "flowtrain-try-" not in error, error


@pytest.mark.parametrize(("template", "command"), [("unet", "predict"), ("gpt_mini", "sample")])
def test_a_segmentation_or_language_model_run_points_to_its_command(app, registry, template, command):
    """Top-k tables mean nothing for masks or tokens: the section names the command that gives them
    instead of offering an upload whose answer would be flattened pixels or vocabulary scores."""
    run = completed_run(registry, onnx=False, doc=zoo.template(template).model_dump(mode="json"))
    at = _open(app, run)
    [info] = [i.value for i in at.info if "flowtrain" in i.value]
    assert f"python -m flowtrain {command} {run.id}" in info
    assert not [b for b in at.button if b.key in ("try.predict", "try.validation")]


def test_a_run_without_model_onnx_says_how_to_write_it(app, registry):
    run = completed_run(registry, onnx=False)
    at = _open(app, run)
    [warning] = [w.value for w in at.warning if "Try" in w.value or "model.onnx" in w.value]
    assert "has no model.onnx to try yet" in warning and f"export-onnx {run.id}" in warning
    assert not [b for b in at.button if b.key == "try.predict"]


def test_a_damaged_model_onnx_is_a_message(app, registry):
    run = completed_run(registry)
    (run.run_dir / "model.onnx").write_bytes(b"not a model")
    at = _upload(_open(app, run), run, ("three.npy", _npy(load_digits().images[:3])))
    [error] = [e.value for e in at.error]
    assert md_text("model.onnx: onnxruntime cannot load this model") in error and md_text("export-onnx") in error
