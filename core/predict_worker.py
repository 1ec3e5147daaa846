"""Preprocess new inputs exactly as a finished run's training did (a subprocess, numpy/pillow only).

``python core/predict_worker.py RUN_DIR OUT_DIR BATCH INPUT…`` (or ``--validation=START:COUNT`` for
the run's own validation samples START… of its split, already preprocessed, with their labels in
``labels.json``) imports the run's own generated ``data.py``
(the same code its training ran: its ``tokenize`` for ``.txt`` lines too), loads the training split with its ``load_splits`` while watching
``_preprocess`` to keep the statistics it fitted there (scale maximum, normalize mean/std,
standardize, the vocabulary of tokenize), then reads each input (images, a folder of images, CSV
rows, ``.npy``/``.npz`` arrays, ``.txt`` lines or a CSV's text column) BATCH samples at a time, applies ``_preprocess`` with those statistics and writes
``OUT_DIR/x.npy`` (the model's inputs), ``names.json`` (one per sample) and ``meta.json`` (class
names, task, which steps' statistics were fitted); for a segmentation run (images or arrays only) also
``sizes.json`` (the height and width each sample's mask is written at: the image's own) and ``masks.json``
(each mask's file name).

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
TEXT_SUFFIX = ".txt"  # one text per line, for a run that tokenizes a text column
INPUT_SUFFIXES = (*IMAGE_SUFFIXES, ".npy", ".npz", ".csv", TEXT_SUFFIX)  # the files predict reads (and folders)
VALIDATION_FLAG = "--validation="
SEGMENTATION = "segmentation"  # data.task of a run whose model predicts a class per pixel
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
    """The statistics ``_preprocess`` fitted on the training split (see :func:`fitted_splits`)."""
    return fitted_splits(data)[0]


def fitted_splits(data: ModuleType) -> tuple[dict[str, Any], dict[str, Any]]:
    """The statistics ``_preprocess`` fitted on the training split, by running the run's own
    ``load_splits`` and keeping the ``fitted`` dict of its call with training rows; and the splits."""
    captured: list[dict[str, Any]] = []
    original = data._preprocess

    def observed(x: Any, train: Any, fitted: dict[str, Any]) -> Any:
        if train is not None and not captured:
            captured.append(fitted)
        return original(x, train, fitted)

    data._preprocess = observed
    try:
        splits = data.load_splits()
    finally:
        data._preprocess = original
    if not captured:
        raise InputError(f"{data.SOURCE}: the run's data.py preprocessed no training split")
    return captured[0], splits


# --------------------------------------------------------------------------- reading inputs


Reader = Callable[[int, int], "np.ndarray | list[str]"]  # (start, stop) -> those raw samples (arrays or texts)


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
            _check_images(data, files[0], spec)
            sources.append((path, [str(f) for f in files], _image_reader(data, files)))
        elif path.suffix.lower() == TEXT_SUFFIX or (path.suffix.lower() == ".csv" and "tokenize" in _ops(spec)):
            texts, names = _text_lines(data, path, spec) if path.suffix.lower() == TEXT_SUFFIX else _csv_texts(path, spec)
            sources.append((path, names, lambda start, stop, texts=texts: texts[start:stop]))
        elif path.suffix.lower() in (".npy", ".npz", ".csv"):
            x, names = _csv_rows(data, path, spec) if path.suffix.lower() == ".csv" else _array(data, path)
            sources.append((path, names, lambda start, stop, x=x: x[start:stop]))
        else:
            raise InputError(f"{path}: unknown kind of input; give images ({', '.join(IMAGE_SUFFIXES)}), a folder "
                             f"of images, a .csv file, .npy/.npz arrays or {TEXT_SUFFIX} lines of text")
    return sources


def _text_lines(data: ModuleType, path: Path, spec: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The texts of a ``.txt`` file, one per line (a final newline ends the last), for the run's own
    ``_preprocess`` to tokenize; an empty line or a file that is not UTF-8 text is refused."""
    if "tokenize" not in _ops(spec):
        raise InputError(f"{path}: this run was trained on {data.SOURCE} ({data.FORMAT}) without a tokenize step, "
                         "not on text; give its samples as images, CSV rows or .npy/.npz arrays")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise InputError(f"{path} line {line}: not UTF-8 text; give the texts as a UTF-8 text file, one per "
                         "line") from exc
    if "\x00" in text:
        raise InputError(f"{path}: not a text file (it holds NUL bytes); give the texts as a UTF-8 text file, "
                         "one per line")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if not lines:
        raise InputError(f"{path}: the file holds no text; give one text per line")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise InputError(f"{path} line {number}: an empty line; give one text per line (remove the empty "
                             "line, or put the text there)")
    return lines, [f"{path} line {n}" for n in range(1, len(lines) + 1)]


def _csv_texts(path: Path, spec: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The texts of a CSV file's text column (the one the run's tokenize step read), one per row."""
    [step] = [s for s in spec["data"]["preprocessing"] if s.get("op") == "tokenize"]
    column = step.get("column", "text")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None) or []
            if column not in header:
                raise InputError(f"{path}: no text column {column!r}; the columns are {header} (the run tokenized "
                                 f"the column {column!r}: name it so in the header line)")
            texts, names = [], []
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise InputError(f"{path} line {reader.line_num}: {len(row)} fields but the header has {len(header)}")
                if not row[header.index(column)].strip():
                    raise InputError(f"{path} line {reader.line_num}, column {column!r}: an empty text")
                texts.append(row[header.index(column)])
                names.append(f"{path} line {reader.line_num}")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read the CSV file ({exc})") from exc
    return texts, names


def _check_images(data: ModuleType, first: Path, spec: dict[str, Any]) -> None:
    if "tokenize" in _ops(spec):
        raise InputError(f"{first}: this run was trained on the texts of {data.SOURCE}, not on image files; give "
                         f"its inputs as a {TEXT_SUFFIX} file, one text per line")
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
    raise InputError(f"this run was trained on {data.SOURCE} ({data.FORMAT}{', with one_hot' if data.FORMAT == 'csv' else ''}); "
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


# --------------------------------------------------------------------------- segmentation inputs

# channels of an image file by its PIL mode (a palette image is colour)
MODE_CHANNELS = {"1": 1, "L": 1, "I": 1, "I;16": 1, "F": 1, "LA": 2, "P": 3, "RGB": 3, "YCbCr": 3, "RGBA": 4,
                 "PA": 4, "CMYK": 4}
CHANNEL_MODES = {1: "L (grey)", 3: "RGB", 4: "RGBA"}
MAX_NAMED = 5  # bad images named one by one; past them, a count


def read_segmentation_inputs(data: ModuleType, paths: list[Path],
                             ) -> tuple[list[tuple[Path, list[str], Reader]], list[list[int]], list[str]]:
    """:func:`read_inputs` for a segmentation run: images, folders of images or ``.npy``/``.npz``
    arrays (CSV rows and texts have no pixels to label), and per sample the (height, width) its mask
    is written at and the mask's file name (relative to the output folder).

    An image must have the model's channels (a grey image for an RGB model is refused rather than
    converted, so that a wrong input cannot pass unnoticed); one of another size than the model's
    Input is resized to it by the run's own image reader (bilinear) and its mask is written at the
    image's own size (the caller resizes the scores back)."""
    sources: list[tuple[Path, list[str], Reader]] = []
    sizes: list[list[int]] = []
    masks: list[str] = []
    wrong: list[str] = []  # images whose channels are not the model's, all named at once
    height, width = data.INPUT_SHAPE[1:]
    for path in paths:
        suffix = path.suffix.lower()
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir() or suffix in IMAGE_SUFFIXES:
            files = [path] if not path.is_dir() else sorted(
                p for p in path.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not files:
                raise InputError(f"{path}: the folder holds no images ({', '.join(IMAGE_SUFFIXES)})")
            if not hasattr(data, "_decode_image"):
                raise InputError(f"{files[0]}: this run was trained on {data.SOURCE} ({data.FORMAT}), not on image "
                                 f"files; give its images as .npy/.npz arrays of shape (N, "
                                 f"{', '.join(map(str, data.INPUT_SHAPE))})")
            file_sizes = _image_sizes(files, data.INPUT_SHAPE[0], wrong)
            sources.append((path, [str(f) for f in files], _resizing_image_reader(data, files, file_sizes)))
            sizes += [list(size) for size in file_sizes]
            masks += [str(f.relative_to(path).with_suffix(".png")) if path.is_dir() else f"{f.stem}.png"
                      for f in files]
        elif suffix in (".npy", ".npz"):
            x, names = _array(data, path)
            sources.append((path, names, lambda start, stop, x=x: x[start:stop]))
            sizes += [[height, width]] * len(names)
            masks += [f"{path.stem}_{i}.png" for i in range(len(names))]
        else:
            raise InputError(f"{path}: a segmentation run labels the pixels of images, so it takes images "
                             f"({', '.join(IMAGE_SUFFIXES)}), a folder of them or .npy/.npz arrays of shape (N, "
                             f"{', '.join(map(str, data.INPUT_SHAPE))}), not {suffix or 'this file'}")
    if wrong:
        channels = data.INPUT_SHAPE[0]
        mode = CHANNEL_MODES.get(channels, f"{channels} channels")
        shown = "; ".join(wrong[:MAX_NAMED]) + (f"; and {len(wrong) - MAX_NAMED} more" if len(wrong) > MAX_NAMED else "")
        raise InputError(f"{len(wrong)} image(s) have other channels than the model, which takes {channels} "
                         f"({mode}): {shown}; convert them to {mode.split()[0]} first (e.g. "
                         f"PIL.Image.open(f).convert({mode.split()[0]!r}).save(...))")
    return sources, sizes, masks


def _image_sizes(files: list[Path], channels: int, wrong: list[str]) -> list[tuple[int, int]]:
    """(height, width) of each image from its header; each image whose channels are not the model's
    is added to ``wrong``."""
    from PIL import Image, UnidentifiedImageError

    sizes = []
    for f in files:
        try:
            with Image.open(f) as image:
                mode, (w, h) = image.mode, image.size
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
            raise InputError(f"{f}: cannot read the image ({exc}); replace it with a PNG or JPEG file") from exc
        has = MODE_CHANNELS.get(mode)
        if has != channels:
            wrong.append(f"{f} ({mode}: {has if has is not None else 'unknown'} channel(s))")
        sizes.append((h, w))
    return sizes


def _resizing_image_reader(data: ModuleType, files: list[Path], sizes: list[tuple[int, int]]) -> Reader:
    """:func:`_image_reader`, but an image of another size than the model's Input is resized to it by
    the run's own ``_decode_image`` (its LOAD_SIZE set for that image: bilinear, as a resize step does)."""
    target = tuple(data.INPUT_SHAPE[1:])

    def read(start: int, stop: int) -> np.ndarray:
        decoded = []
        for f, size in zip(files[start:stop], sizes[start:stop], strict=True):
            load_size = data.LOAD_SIZE
            data.LOAD_SIZE = target if tuple(size) != target else load_size
            try:
                decoded.append(data._decode_image(f, str(f)))
            except data.DataError as exc:
                raise InputError(str(exc)) from exc
            finally:
                data.LOAD_SIZE = load_size
        return np.stack(decoded)

    return read


# --------------------------------------------------------------------------- main


def preprocess(run_dir: Path, inputs: list[Path], out: Path, batch: int,
               validation: tuple[int, int] | None = None) -> None:
    """Write ``x.npy`` (the preprocessed inputs, ``batch`` samples at a time), ``names.json`` and
    ``meta.json`` into the folder ``out`` (see the module docstring); with ``validation`` (start,
    count), the run's own validation samples instead of ``inputs``, and ``labels.json``."""
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    data = load_data_module(run_dir)
    ops = _ops(spec)
    fitted, splits = fitted_splits(data)  # also sets data.CLASS_NAMES
    if validation is not None:
        names = _validation_samples(splits, *validation, out)
    elif data.TASK == SEGMENTATION:  # images in, one mask per image out: sizes and mask names too
        sources, sizes, masks = read_segmentation_inputs(data, inputs)
        names = _preprocess_inputs(data, sources, fitted, out, batch)
        (out / "sizes.json").write_text(json.dumps(sizes), encoding="utf-8")
        (out / "masks.json").write_text(json.dumps(masks), encoding="utf-8")
    else:
        names = _preprocess_inputs(data, read_inputs(data, inputs, spec), fitted, out, batch)
    steps = [f"{ops[int(k)]} (step {int(k) + 1})" if k.isdigit() and int(k) < len(ops) else k for k in sorted(fitted)]
    meta = {"task": data.TASK, "class_names": data.CLASS_NAMES, "fitted": steps, "source": data.SOURCE}
    (out / "names.json").write_text(json.dumps(names), encoding="utf-8")
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def _preprocess_inputs(data: ModuleType, sources: list[tuple[Path, list[str], Reader]], fitted: dict[str, Any],
                       out: Path, batch: int) -> list[str]:
    names = [name for _, source_names, _ in sources for name in source_names]
    x_out: np.ndarray | None = None
    done = 0
    for path, source_names, read in sources:
        for start in range(0, len(source_names), batch):
            raw = read(start, min(start + batch, len(source_names)))  # texts stay a list for tokenize
            try:
                x = data._preprocess(raw if isinstance(raw, list) else np.asarray(raw), None, fitted)
            except data.DataError as exc:
                raise InputError(f"{path}: {exc}") from exc
            if tuple(x.shape[1:]) != tuple(data.INPUT_SHAPE):
                became = ("are, after preprocessing," if isinstance(raw, list) else
                          f"have shape {tuple(np.shape(raw)[1:])}, which preprocessing makes")
                raise InputError(f"{path}: the samples {became} {tuple(x.shape[1:])}, but the model expects "
                                 f"{tuple(data.INPUT_SHAPE)}")
            if x_out is None:
                x_out = np.lib.format.open_memmap(out / "x.npy", mode="w+", dtype=x.dtype,
                                                  shape=(len(names), *data.INPUT_SHAPE))
            x_out[done:done + len(x)] = x
            done += len(x)
    if x_out is not None:
        x_out.flush()
    return names


def _validation_samples(splits: dict[str, Any], start: int, count: int, out: Path) -> list[str]:
    """Validation samples ``start``… (at most ``count``), as training preprocessed them, and their labels."""
    val = splits.get("val")
    if val is None or len(val) == 0:
        raise InputError("this run has no validation split (its data layer's validation_split is 0)")
    if not 0 <= start < len(val):
        raise InputError(f"validation sample {start}: the validation split holds samples 0 to {len(val) - 1}")
    stop = min(start + count, len(val))
    np.save(out / "x.npy", np.asarray(val.x[start:stop]))
    labels = np.asarray(val.y[start:stop])
    (out / "labels.json").write_text(json.dumps(labels.tolist()), encoding="utf-8")
    return [f"validation sample {i}" for i in range(start, stop)]


def main(argv: list[str]) -> int:
    run_dir, out, batch, *inputs = argv
    validation = None
    if inputs and inputs[0].startswith(VALIDATION_FLAG):
        start, count = inputs.pop(0).removeprefix(VALIDATION_FLAG).split(":")
        validation = (int(start), int(count))
    try:
        preprocess(Path(run_dir), [Path(i) for i in inputs], Path(out), int(batch), validation)
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
