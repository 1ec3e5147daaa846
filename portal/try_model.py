""""Try the model" on a completed run's page: the run's ``model.onnx`` on uploaded inputs or on a few of
its own validation samples, with the top 5 classes as a table and a bar chart and, for images, the
input as the model saw it after preprocessing.

Nothing is reimplemented here: :func:`core.prediction.prepare_inputs` preprocesses with the run's own
``data.py`` (statistics fitted on the training split) in a subprocess, :func:`core.prediction.onnx_outputs`
runs ``model.onnx`` on onnxruntime and :func:`core.prediction.interpret` turns the outputs into
classes and probabilities, exactly as ``python -m flowtrain predict`` does. The run is asked of the
registry with the signed-in user, so only their own runs can be tried; uploads are bounded by
:data:`portal.limits.MAX_TRY_UPLOAD_MB` and one prediction per user runs at a time
(:data:`portal.limits.GATE`). A bad input is one message naming the file and what was expected.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from core.errors import FlowTrainError
from core.predict_worker import INPUT_SUFFIXES
from core.prediction import Inputs, Prediction, activation_of, interpret, onnx_outputs, prepare_inputs
from portal import limits
from portal.param_text import md_text
from schedulers.base import RunState
from schedulers.model_export import export_note
from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run, RunNotFound
from schedulers.registry.runs import RunRegistry

TOP = 5
MAX_VALIDATION = 20  # validation samples picked at once
MAX_SHOWN = 50  # samples whose preprocessed input is kept for the page
PREPROCESS_TIMEOUT_S = 300.0
RESULT = "try.result.{}"  # session key of a run's last result


@dataclass
class Tried:
    """One prediction's result as the page shows it."""

    what: str  # where the samples came from: "1 file(s): a.npy" or "the validation split (samples 0 to 4)"
    predictions: list[Prediction]
    labels: list[str] | None  # the true class (validation samples)
    images: list[np.ndarray | None]  # the model's input, as an image (H, W) or (H, W, 3) in 0..1, per shown sample
    fitted: list[str]


def _label(inputs: Inputs, value: Any) -> str:
    if inputs.task == "classification" and inputs.class_names and isinstance(value, int):
        return inputs.class_names[value]
    return str(value)


def as_image(sample: np.ndarray) -> np.ndarray | None:
    """A preprocessed sample ``(C, H, W)`` with 1 or 3 channels as an image in 0..1 (min–max scaled,
    since normalised values are no colours); ``None`` for other samples (tables, sequences)."""
    x = np.asarray(sample, np.float64)
    if x.ndim != 3 or x.shape[0] not in (1, 3):
        return None
    low, high = float(x.min()), float(x.max())
    x = (x - low) / (high - low) if high > low else np.zeros_like(x)
    return x[0] if x.shape[0] == 1 else x.transpose(1, 2, 0)


def predict_files(run: Run, files: list[tuple[str, bytes]]) -> Tried:
    """The run's model on uploaded ``files`` (name, bytes); :class:`FlowTrainError` names a bad file."""
    with tempfile.TemporaryDirectory(prefix="flowtrain-try-") as tmp:
        folder = Path(tmp) / "inputs"
        folder.mkdir()
        paths = []
        for name, data in files:
            path = folder / name
            path.write_bytes(data)
            paths.append(path)
        where = str(folder) + "/"
        try:
            return _tried(run, Path(tmp), paths, None, f"{len(files)} file(s): {', '.join(n for n, _ in files)}",
                          strip=where)
        except FlowTrainError as err:
            raise FlowTrainError(str(err).replace(where, "")) from None


def predict_validation(run: Run, start: int, count: int) -> Tried:
    """The run's model on its validation samples ``start`` … ``start + count - 1``."""
    with tempfile.TemporaryDirectory(prefix="flowtrain-try-") as tmp:
        return _tried(run, Path(tmp), [], (start, count), "")


def _tried(run: Run, workdir: Path, paths: list[Path], validation: tuple[int, int] | None, what: str,
           strip: str = "") -> Tried:
    inputs = prepare_inputs(run.run_dir, paths, workdir, timeout=PREPROCESS_TIMEOUT_S, validation=validation)
    predictions = interpret(onnx_outputs(run.run_dir / ONNX_NAME, inputs), inputs, top=TOP,
                            activation=activation_of(run.spec()))
    for p in predictions:
        p.name = p.name.replace(strip, "") if strip else p.name
    if validation is not None:
        what = f"the validation split (samples {validation[0]} to {validation[0] + len(predictions) - 1})"
    labels = [_label(inputs, v) for v in inputs.labels] if inputs.labels is not None else None
    images = [as_image(inputs.x[i]) for i in range(min(len(inputs.names), MAX_SHOWN))]
    return Tried(what=what, predictions=predictions, labels=labels, images=images, fitted=inputs.fitted)


# --------------------------------------------------------------------------- the section


def try_section(registry: RunRegistry, run_id: str, user: str) -> None:
    """The "Try the model" section of a completed run (the signed-in ``user``'s own)."""
    try:
        run = registry.get(run_id, user)
    except RunNotFound:
        st.error(f"No run {run_id} for {user}.")
        return
    if run.state != RunState.COMPLETED:
        return
    st.markdown("#### Try the model")
    elsewhere = _tried_elsewhere(run)
    if elsewhere:
        st.info(elsewhere, icon=":material/terminal:")
        return
    if not (run.run_dir / ONNX_NAME).is_file():
        note = export_note(registry, run.id)
        st.warning(f"Run {run.id} has no {ONNX_NAME} to try yet"
                   + (f" ({md_text(note)})" if note else ": it is written shortly after the run completes")
                   + f". Write it with `python -m flowtrain export-onnx {run.id} --out {run.run_dir / ONNX_NAME}`.",
                   icon=":material/model_training:")
        return
    key = RESULT.format(run.id)
    upload, validation = st.tabs(["Upload inputs", "Validation samples"])
    with upload:
        files = st.file_uploader(
            f"Images, .npy/.npz arrays, CSV rows or .txt lines of text (at most {limits.MAX_TRY_UPLOAD_MB} MB in all)",
            type=[s.lstrip(".") for s in INPUT_SUFFIXES], accept_multiple_files=True, key=f"try.files.{run.id}",
            max_upload_size=limits.MAX_TRY_UPLOAD_MB,
            help="Each input as the run's raw samples, before preprocessing: images are resized, scaled and "
                 "normalised by the run's own data.py; arrays are (N, …) with the samples first; a CSV holds the "
                 "feature columns by name; a .txt file holds one text per line, tokenized by the run's data.py "
                 "for a text run (see docs/predict.md).")
        if st.button("Predict", key="try.predict", disabled=not files, type="primary"):
            _run_guarded(key, user, lambda: _uploaded(run, files or []))
    with validation:
        a, b, c = st.columns([1, 1, 1], vertical_alignment="bottom")
        start = a.number_input("From validation sample", min_value=0, value=0, step=1, key="try.val_start")
        count = b.number_input("How many", min_value=1, max_value=MAX_VALIDATION, value=5, step=1,
                               key="try.val_count")
        if c.button("Predict these", key="try.validation"):
            _run_guarded(key, user, lambda: predict_validation(run, int(start), int(count)))
    shown = st.session_state.get(key)
    if isinstance(shown, str):
        st.error(shown, icon=":material/error:")
    elif isinstance(shown, Tried):
        show(shown)


def _tried_elsewhere(run: Run) -> str | None:
    """Where a run whose outputs are not class scores or values is tried instead: a segmentation model's
    masks and a language model's tokens come from the command line (this section shows top-k tables)."""
    task = run.spec().data.task
    if task == "segmentation":
        return (f"Run {run.id} labels every pixel (data.task segmentation), and this section shows class "
                f"probabilities per input, not masks. Write one PNG mask per image with `python -m flowtrain "
                f"predict {run.id} IMAGES… --out DIR` (docs/predict.md).")
    if task == "language_modeling":
        return (f"Run {run.id} is a language model (data.task language_modeling): it continues token sequences "
                f"rather than labelling inputs. Generate from it with `python -m flowtrain sample {run.id} "
                "--prompt-ids IDS --tokens N` (docs/language-models.md).")
    return None


def _uploaded(run: Run, files: list[Any]) -> Tried:
    total = sum(f.size for f in files)
    if total > limits.MAX_TRY_UPLOAD_MB * 2**20:
        raise FlowTrainError(f"the uploads hold {total:,} bytes; at most {limits.MAX_TRY_UPLOAD_MB} MB are "
                             "tried at once here (`python -m flowtrain predict` takes inputs of any size)")
    names: set[str] = set()
    for f in files:
        name = Path(f.name).name
        if not name or name.startswith(".") or name in names:
            raise FlowTrainError(f"{f.name!r}: give each upload a distinct file name")
        names.add(name)
    return predict_files(run, [(Path(f.name).name, f.getvalue()) for f in files])


def _run_guarded(key: str, user: str, action: Any) -> None:
    """Run ``action`` as the user's one prediction at a time; keep its result or its message."""
    try:
        with limits.GATE.hold("predict", user), st.spinner("Preprocessing with the run's data.py and predicting…"):
            st.session_state[key] = action()
    except FlowTrainError as err:
        st.session_state[key] = md_text(str(err))


def show(tried: Tried) -> None:
    """The result: a summary line, a table of every sample's top class, and one sample in detail."""
    preds = tried.predictions
    fitted = (f"statistics of {', '.join(tried.fitted)} recomputed from the training split" if tried.fitted
              else "no fitted statistics")
    st.caption(md_text(f"{len(preds)} sample(s) from {tried.what} through {ONNX_NAME}, preprocessed by the run's "
                       f"data.py ({fitted})"))
    if not preds:
        return
    if preds[0].classes is None:
        rows = [{"input": p.name, **{f"value_{i}": v for i, v in enumerate(p.values or [])}} for p in preds]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        return
    summary = [{"input": p.name, "class": p.classes[0][1], "probability": round(p.classes[0][2], 4)} for p in preds]
    if tried.labels is not None:
        for row, label in zip(summary, tried.labels, strict=True):
            row["true class"] = label
    if len(preds) > 1:
        st.dataframe(pd.DataFrame(summary), hide_index=True, width="stretch", key="try.summary")
    names = [p.name for p in preds]
    chosen = st.selectbox("Sample", range(len(preds)), format_func=lambda i: names[i], key="try.sample") \
        if len(preds) > 1 else 0
    chosen = chosen if chosen is not None and chosen < len(preds) else 0
    detail(preds[chosen], tried.images[chosen] if chosen < len(tried.images) else None,
           tried.labels[chosen] if tried.labels is not None else None)


def detail(pred: Prediction, image: np.ndarray | None, label: str | None) -> None:
    """One sample: its input as the model saw it, the top classes as a table and a bar chart."""
    top = pd.DataFrame([{"rank": i + 1, "class": c, "probability": round(p, 4)}
                        for i, (_, c, p) in enumerate(pred.classes or [])])
    left, right = st.columns([1, 2]) if image is not None else (None, st.container())
    if left is not None:
        with left:
            st.image(image, caption="as the model saw it (after preprocessing, min–max scaled)", clamp=True,
                     width=min(224, max(112, 4 * image.shape[1])))
    with right:
        st.markdown(f"**{md_text(pred.name)}**: class **{md_text(pred.classes[0][1])}**"
                    + (f" (true class {md_text(label)})" if label is not None else ""))
        st.table(top.set_index("rank"))
        chart = alt.Chart(top).mark_bar().encode(
            x=alt.X("probability:Q", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("class:N", sort=None, title=None), tooltip=["class", "probability"]).properties(height=160)
        st.altair_chart(chart, width="stretch")
