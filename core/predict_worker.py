"""Preprocess new inputs exactly as a finished run's training did (a subprocess, numpy/pillow only).

``python core/predict_worker.py RUN_DIR OUT_DIR BATCH INPUT…`` imports the run's own generated ``data.py``
(the same code its training ran), loads the training split with its ``load_splits`` while watching
``_preprocess`` to keep the statistics it fitted there (scale maximum, normalize mean/std,
standardize), then reads each input (images, a folder of images, CSV rows, ``.npy``/``.npz``
arrays) BATCH samples at a time, applies ``_preprocess`` with those statistics and writes
``OUT_DIR/x.npy`` (the model's inputs), ``names.json`` (one per sample) and ``meta.json`` (class
names, task, which steps' statistics were fitted).

Nothing here reimplements a preprocessing step, so training and prediction cannot drift. A bad
input is one line on stderr, ``error: …``, naming the file and what was expected, and exit code 2.
This file imports nothing of FlowTrain, only numpy and the run folder's ``data.py`` (by its path).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
EXIT_BAD_INPUT = 2


class InputError(Exception):
    """An input that the run's model cannot take; the message names the file and the fix."""


def load_data_module(run_dir: Path) -> ModuleType:
    """The run's generated ``data.py`` as a module of its own."""
    path = run_dir / "data.py"
    if not path.is_file():
        raise InputError(f"{run_dir}: the run folder has no data.py, so its preprocessing is unknown")
    spec = importlib.util.spec_from_file_location("flowtrain_run_data", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def fit_statistics(data: ModuleType) -> dict[str, Any]:
    """The statistics ``_preprocess`` fitted on the training split, by running the run's own
    ``load_splits`` and keeping the ``fitted`` dict of its call with training rows."""
    captured: list[dict[str, Any]] = []
    original = data._preprocess

    def observed(x: Any, train: Any, fitted: dict[str, Any]) -> Any:
        if train is not None and not captured:
            captured.append(fitted)
        return original(x, train, fitted)

    data._preprocess = observed
    try:
        data.load_splits()
    finally:
        data._preprocess = original
    if not captured:
        raise InputError(f"{data.SOURCE}: the run's data.py preprocessed no training split")
    return captured[0]


# --------------------------------------------------------------------------- reading inputs


Reader = Callable[[int, int], np.ndarray]  # (start, stop) -> those raw samples


def read_inputs(data: ModuleType, paths: list[Path], spec: dict[str, Any]) -> list[tuple[Path, list[str], Reader]]:
    """Per input: its path, a name per sample, and a reader of its raw samples (before preprocessing),
    so that large inputs are read batch by batch (``.npy`` files are memory-mapped)."""
    sources = []
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir() or path.suffix.lower() in IMAGE_SUFFIXES:
            files = [path] if not path.is_dir() else sorted(
                p for p in path.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not files:
                raise InputError(f"{path}: the folder holds no images ({', '.join(IMAGE_SUFFIXES)})")
            _check_images(data, files[0])
            sources.append((path, [str(f) for f in files], _image_reader(data, files)))
        elif path.suffix.lower() in (".npy", ".npz", ".csv"):
            x, names = _csv_rows(data, path, spec) if path.suffix.lower() == ".csv" else _array(data, path)
            sources.append((path, names, lambda start, stop, x=x: x[start:stop]))
        else:
            raise InputError(f"{path}: unknown kind of input; give images ({', '.join(IMAGE_SUFFIXES)}), a folder "
                             "of images, a .csv file or .npy/.npz arrays")
    return sources


def _check_images(data: ModuleType, first: Path) -> None:
    if not hasattr(data, "_decode_image"):
        raise InputError(f"{first}: this run was trained on {data.SOURCE} ({data.FORMAT}), not on image files; "
                         f"give its samples as .npy/.npz arrays of shape (N, {', '.join(map(str, data.INPUT_SHAPE))})")


def _image_reader(data: ModuleType, files: list[Path]) -> Reader:
    def read(start: int, stop: int) -> np.ndarray:
        try:
            return np.stack([data._decode_image(f, str(f)) for f in files[start:stop]])
        except data.DataError as exc:
            raise InputError(str(exc)) from exc

    return read


def _array(data: ModuleType, path: Path) -> tuple[np.ndarray, list[str]]:
    try:
        if path.suffix.lower() == ".npy":
            x = np.load(path, mmap_mode="r", allow_pickle=False)
        else:
            with np.load(path, allow_pickle=False) as arrays:
                keys = list(arrays.keys())
                key = "x" if "x" in keys else (keys[0] if len(keys) == 1 else None)
                if key is None:
                    raise InputError(f"{path}: expected an array 'x' (or a single array), found {keys}; "
                                     "save with numpy.savez(path, x=...)")
                x = arrays[key]
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"{path}: cannot read the array file ({exc}); save it again with numpy.save/savez "
                         "(object arrays are not accepted)") from exc
    if x.dtype.kind not in "biuf":
        raise InputError(f"{path}: the array holds {x.dtype} values; expected numbers (int or float)")
    shape = tuple(data.INPUT_SHAPE)
    if len(shape) == 3 and x.ndim == 3 and shape[0] == 1:
        x = x[:, None]  # (N, H, W) grey images
    elif len(shape) == 3 and x.ndim == 4 and x.shape[1] != shape[0] and x.shape[3] == shape[0]:
        x = x.transpose(0, 3, 1, 2)  # channels last -> channels first
    if x.ndim != len(shape) + 1:
        raise InputError(f"{path}: the array has shape {x.shape} but the model takes samples of shape {shape}: "
                         f"expected (N, {', '.join(map(str, shape))}) with N samples first")
    if len(shape) == 3 and x.shape[1] != shape[0]:
        raise InputError(f"{path}: the samples have {x.shape[1]} channels (shape {x.shape[1:]}) but the model "
                         f"expects {shape[0]} (shape {shape})")
    return x, [f"{path}[{i}]" for i in range(len(x))]


def _feature_columns(data: ModuleType, spec: dict[str, Any]) -> list[str]:
    """The table columns the model's features came from, in order."""
    if data.FORMAT == "builtin":
        from sklearn import datasets

        loader = getattr(datasets, "load_" + data.SOURCE.split(":", 1)[1])
        return [str(c) for c in loader().feature_names]
    if data.FORMAT == "csv" and not getattr(data, "ONE_HOT_COLUMNS", None) and "tokenize" not in _ops(spec):
        header = data._read_csv(data.pinned_source())[0]
        return [c for c in header if c != data.TARGET and c not in data.IGNORED_COLUMNS]
    raise InputError(f"this run was trained on {data.SOURCE} ({data.FORMAT}{', with one_hot/tokenize' if data.FORMAT == 'csv' else ''}); "
                     "CSV input is not supported for it: give .npy/.npz arrays of its samples instead")


def _csv_rows(data: ModuleType, path: Path, spec: dict[str, Any]) -> tuple[np.ndarray, list[str]]:
    features = _feature_columns(data, spec)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None) or []
            missing = [c for c in features if c not in header]
            if missing:
                shown = ", ".join(missing[:10]) + (f", … ({len(missing)} in all)" if len(missing) > 10 else "")
                raise InputError(f"{path}: the feature columns {shown} are missing; the model needs the columns "
                                 f"{', '.join(features[:10])}{', …' if len(features) > 10 else ''} "
                                 f"({len(features)} in all) in the header line")
            where = [header.index(c) for c in features]
            rows, lines = [], []
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise InputError(f"{path} line {reader.line_num}: {len(row)} fields but the header has {len(header)}")
                rows.append([row[j] for j in where])
                lines.append(reader.line_num)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read the CSV file ({exc})") from exc
    x = np.empty((len(rows), len(features)), np.float32)
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            try:
                x[i, j] = float(value)
            except ValueError:
                raise InputError(f"{path} line {lines[i]}, column {features[j]!r}: {value!r} is not a number") from None
    if not np.isfinite(x).all():
        i, j = (int(k) for k in np.argwhere(~np.isfinite(x))[0])
        raise InputError(f"{path} line {lines[i]}, column {features[j]!r}: not a finite number")
    # a built-in dataset's raw samples may be images (digits: 64 columns are 1x8x8 pixels)
    shape = tuple(data._load_builtin()[0].shape[1:]) if data.FORMAT == "builtin" else (len(features),)
    return x.reshape((len(x), *shape)), [f"{path} line {n}" for n in lines]


def _ops(spec: dict[str, Any]) -> list[str]:
    return [step.get("op", "") for step in spec.get("data", {}).get("preprocessing", [])]


# --------------------------------------------------------------------------- main


def preprocess(run_dir: Path, inputs: list[Path], out: Path, batch: int) -> None:
    """Write ``x.npy`` (the preprocessed inputs, ``batch`` samples at a time), ``names.json`` and
    ``meta.json`` into the folder ``out`` (see the module docstring)."""
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    data = load_data_module(run_dir)
    ops = _ops(spec)
    if "tokenize" in ops:
        raise InputError("this run tokenizes text; prediction on text is not supported yet")
    fitted = fit_statistics(data)  # also sets data.CLASS_NAMES
    sources = read_inputs(data, inputs, spec)
    names = [name for _, source_names, _ in sources for name in source_names]
    x_out: np.ndarray | None = None
    done = 0
    for path, source_names, read in sources:
        for start in range(0, len(source_names), batch):
            raw = np.asarray(read(start, min(start + batch, len(source_names))))
            try:
                x = data._preprocess(raw, None, fitted)
            except data.DataError as exc:
                raise InputError(f"{path}: {exc}") from exc
            if tuple(x.shape[1:]) != tuple(data.INPUT_SHAPE):
                raise InputError(f"{path}: the samples have shape {tuple(raw.shape[1:])}, which preprocessing makes "
                                 f"{tuple(x.shape[1:])}, but the model expects {tuple(data.INPUT_SHAPE)}")
            if x_out is None:
                x_out = np.lib.format.open_memmap(out / "x.npy", mode="w+", dtype=x.dtype,
                                                  shape=(len(names), *data.INPUT_SHAPE))
            x_out[done:done + len(x)] = x
            done += len(x)
    if x_out is not None:
        x_out.flush()
    steps = [f"{ops[int(k)]} (step {int(k) + 1})" if k.isdigit() and int(k) < len(ops) else k for k in sorted(fitted)]
    meta = {"task": data.TASK, "class_names": data.CLASS_NAMES, "fitted": steps, "source": data.SOURCE}
    (out / "names.json").write_text(json.dumps(names), encoding="utf-8")
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def main(argv: list[str]) -> int:
    run_dir, out, batch, *inputs = argv
    try:
        preprocess(Path(run_dir), [Path(i) for i in inputs], Path(out), int(batch))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001  (the run's own DataError, named by its class and message)
        if type(exc).__name__ != "DataError":
            raise
        print(f"error: the run's training data cannot be loaded again to fit its preprocessing: {exc}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
