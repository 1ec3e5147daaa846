"""The generated, framework-free ``data.py``: rendered from the template, imported, run on real files."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.errors import SpecError
from core.mapping.data import augmentation_plan, data_context, resolve_format
from core.validate import validate
from tests.data.fixtures import (
    load_data_module,
    render_data_py,
    spec_with_data,
    tabular_rows,
    truncate,
    write_csv,
    write_images,
    write_parquet,
)

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")


def csv_spec(source: str, **data: object) -> object:
    base = {"source": source, "target": "label", "num_classes": 3, "input_shape": [2],
            "validation_split": 0.25}
    return spec_with_data({**base, **data})


# --------------------------------------------------------------------------- sklearn digits (the default)


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> object:
    spec = zoo.template("mnist_cnn")
    return load_data_module(spec, tmp_path_factory.mktemp("digits"), validate(spec))


def test_digits_mnist_cnn_shapes_and_constants(digits: object) -> None:
    splits = digits.load_splits()
    assert set(splits) == {"train", "val"}
    assert digits.INPUT_SHAPE == (1, 28, 28) and digits.INPUT_DTYPE == "float32"
    assert digits.NUM_CLASSES == 10 and digits.TASK == "classification" and digits.FORMAT == "builtin"
    assert digits.BATCH_SIZE == 64 and digits.SEED == 0 and digits.VALIDATION_SPLIT == 0.2
    train, val = splits["train"], splits["val"]
    assert train.x.shape == (1437, 1, 28, 28) and val.x.shape == (360, 1, 28, 28)
    assert train.x.dtype == np.float32 and train.y.dtype == np.int64 and train.y.shape == (1437,)
    assert set(np.unique(train.y)) == set(range(10))
    # scale by 16, then (x - 0.3) / 0.4: raw 0 -> -0.75, raw 16 -> 1.75
    assert train.x.min() == pytest.approx(-0.75) and train.x.max() == pytest.approx(1.75)
    text = digits.describe(splits)
    assert "train: 1437 samples" in text and "val: 360 samples" in text and "per class 0:" in text


def test_digits_split_is_deterministic_and_disjoint(digits: object) -> None:
    a, b = digits.load_splits(), digits.load_splits()
    for name in a:
        np.testing.assert_array_equal(a[name].x, b[name].x)
        np.testing.assert_array_equal(a[name].y, b[name].y)
    idx = digits.split_indices(1797)
    order = np.random.default_rng(0).permutation(1797)  # the documented rule every framework shares
    np.testing.assert_array_equal(idx["val"], np.sort(order[:360]))
    assert not set(idx["train"]) & set(idx["val"]) and len(idx["train"]) + len(idx["val"]) == 1797
    from sklearn.datasets import load_digits

    np.testing.assert_array_equal(a["val"].y, load_digits().target[idx["val"]])


def test_resize_matches_pil_bilinear(digits: object) -> None:
    from PIL import Image

    image = np.random.default_rng(1).random((8, 8)).astype(np.float32)
    ours = digits.resize(image[None, None], (28, 28))[0, 0]
    pil = np.asarray(Image.fromarray(image, "F").resize((28, 28), Image.Resampling.BILINEAR))
    np.testing.assert_allclose(ours, pil, atol=1e-5)


def test_importing_data_py_loads_only_numpy(tmp_path: Path) -> None:
    """Import-time dependencies: numpy only; scikit-learn is imported by load_splits."""
    (tmp_path / "data.py").write_text(render_data_py(zoo.template("mnist_cnn")))
    code = ("import sys, data; assert 'sklearn' not in sys.modules and 'PIL' not in sys.modules; "
            "s = data.load_splits(); assert 'sklearn' in sys.modules; print(len(s['train']))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1437"


@pytest.mark.parametrize("name, features", [("sklearn:iris", 4), ("sklearn:wine", 13), ("sklearn:breast_cancer", 30)])
def test_builtin_tabular_standardized(tmp_path: Path, name: str, features: int) -> None:
    spec = spec_with_data({"source": name, "preprocessing": [{"op": "standardize"}], "test_split": 0.2})
    data = load_data_module(spec, tmp_path, validate(spec))
    splits = data.load_splits()
    assert set(splits) == {"train", "val", "test"} and data.INPUT_SHAPE == (features,)
    train = splits["train"].x
    np.testing.assert_allclose(train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(train.std(axis=0), 1, atol=1e-4)


# --------------------------------------------------------------------------- CSV


def test_csv_features_one_hot_label_encoding(tmp_path: Path) -> None:
    rows = [[a, b, colour, name, ["cat", "dog", "eel"][label]] for a, b, colour, name, label in tabular_rows(40)]
    write_csv(tmp_path / "t.csv", ["a", "b", "colour", "name", "label"], rows)
    spec = csv_spec(str(tmp_path / "t.csv"), input_shape=[5], preprocessing=[{"op": "one_hot", "columns": ["colour"]},
                                                             {"op": "label_encode"}])
    data = load_data_module(spec, tmp_path / "gen")
    splits = data.load_splits()
    train, val = splits["train"], splits["val"]
    assert len(train) == 30 and len(val) == 10 and train.x.shape == (30, 5)
    assert data.CLASS_NAMES == ["cat", "dog", "eel"] and data.IGNORED_COLUMNS == ["name"]
    rows_by_index = {i: r for i, r in enumerate(rows)}
    first = data.split_indices(40)["train"][0]
    a, b, colour, _, label = rows_by_index[first]
    expected_one_hot = [float(colour == c) for c in ("blue", "green", "red")]
    np.testing.assert_allclose(train.x[0], [a, b, *expected_one_hot], rtol=1e-6)
    assert train.y[0] == ["cat", "dog", "eel"].index(label)
    assert "ignored text columns: 'name'" in data.describe(splits)


def test_csv_labels_text_numbers_and_typos(tmp_path: Path) -> None:
    rows = [[i, ["10", "2", "abc"][i % 3]] for i in range(12)]
    write_csv(tmp_path / "mixed.csv", ["x", "label"], rows)
    data = load_data_module(csv_spec(str(tmp_path / "mixed.csv"), input_shape=[1], preprocessing=[{"op": "label_encode"}]),
                            tmp_path / "g1")
    data.load_splits()
    assert data.CLASS_NAMES == ["10", "2", "abc"]  # mixed values sort as text
    write_csv(tmp_path / "nums.csv", ["x", "label"], [[i, ["10", "2", "7"][i % 3]] for i in range(12)])
    data = load_data_module(csv_spec(str(tmp_path / "nums.csv"), input_shape=[1], preprocessing=[{"op": "label_encode"}]),
                            tmp_path / "g2")
    data.load_splits()
    assert data.CLASS_NAMES == ["2", "7", "10"]  # numbers sort as numbers
    rows = [[i, i % 3] for i in range(12)]
    rows[9][1] = "two"
    write_csv(tmp_path / "typo.csv", ["x", "label"], rows)
    data = load_data_module(csv_spec(str(tmp_path / "typo.csv"), input_shape=[1]), tmp_path / "g3")
    with pytest.raises(data.DataError, match=r"typo.csv row 10 \(line 11\), column 'label': 'two' is not a finite "
                                              r"number; fix the value, or add a label_encode step"):
        data.load_splits()


def test_csv_non_numeric_value_names_row_and_column(tmp_path: Path) -> None:
    rows = [[i * 0.5, i, i % 3] for i in range(20)]
    rows[6][1] = "abc"  # data row 7 (line 8 of the file)
    write_csv(tmp_path / "bad.csv", ["x1", "x2", "label"], rows)
    data = load_data_module(csv_spec(str(tmp_path / "bad.csv")), tmp_path / "gen")
    with pytest.raises(data.DataError) as err:
        data.load_splits()
    message = str(err.value)
    assert "bad.csv row 7 (line 8)" in message and "column 'x2'" in message and "'abc'" in message


def test_csv_label_out_of_range_names_row_value_and_classes(tmp_path: Path) -> None:
    rows = [[i, i % 10] for i in range(30)]
    rows[4][1] = 12
    write_csv(tmp_path / "labels.csv", ["x", "label"], rows)
    data = load_data_module(csv_spec(str(tmp_path / "labels.csv"), num_classes=10, input_shape=[1]), tmp_path / "gen")
    with pytest.raises(data.DataError) as err:
        data.load_splits()
    message = str(err.value)
    assert "labels.csv row 5" in message and "label 12" in message and "NUM_CLASSES is 10" in message


def test_csv_ragged_row_missing_target_and_empty(tmp_path: Path) -> None:
    (tmp_path / "ragged.csv").write_text("x,label\n1,0\n2,1,7\n")
    data = load_data_module(csv_spec(str(tmp_path / "ragged.csv"), input_shape=[1]), tmp_path / "g1")
    with pytest.raises(data.DataError, match=r"ragged.csv row 2 \(line 3\): 3 fields but the header has 2"):
        data.load_splits()
    write_csv(tmp_path / "notarget.csv", ["x", "y"], [[1, 0]])
    data = load_data_module(csv_spec(str(tmp_path / "notarget.csv"), input_shape=[1]), tmp_path / "g2")
    with pytest.raises(data.DataError, match=r"no target column 'label'; the columns are \['x', 'y'\]"):
        data.load_splits()
    (tmp_path / "latin.csv").write_bytes("x,label\n1,0\n2,1\ncaf\u00e9,1\n".encode("latin-1"))
    data = load_data_module(csv_spec(str(tmp_path / "latin.csv"), input_shape=[1]), tmp_path / "g4")
    with pytest.raises(data.DataError, match=r"latin.csv line \d+: not UTF-8 text"):
        data.load_splits()
    write_csv(tmp_path / "empty.csv", ["x", "label"], [])
    data = load_data_module(csv_spec(str(tmp_path / "empty.csv"), input_shape=[1]), tmp_path / "g3")
    with pytest.raises(data.DataError, match="the dataset is empty"):
        data.load_splits()


def test_csv_regression_and_wrong_width(tmp_path: Path) -> None:
    rows = [[i, 2 * i, 0.5 * i] for i in range(10)]
    write_csv(tmp_path / "reg.csv", ["a", "b", "label"], rows)
    spec = csv_spec(str(tmp_path / "reg.csv"), task="regression", num_classes=None, validation_split=0.2)
    data = load_data_module(spec, tmp_path / "g1")
    splits = data.load_splits()
    assert data.NUM_CLASSES is None and splits["train"].y.dtype == np.float32
    np.testing.assert_allclose(splits["train"].y, splits["train"].x[:, 0] * 0.5)
    data = load_data_module(csv_spec(str(tmp_path / "reg.csv"), task="regression", num_classes=None, input_shape=[3]),
                            tmp_path / "g2")
    with pytest.raises(data.DataError, match=r"shape \(2,\) after preprocessing but the model's Input expects \(3,\)"):
        data.load_splits()


def test_tokenize_vocabulary_from_training_split(tmp_path: Path) -> None:
    texts = ["the cat sat", "The dog sat!", "a cat, a dog", "the the the", "zebra only", "cat"]
    write_csv(tmp_path / "text.csv", ["text", "label"], [[t, i % 2] for i, t in enumerate(texts)])
    spec = spec_with_data({"source": str(tmp_path / "text.csv"), "num_classes": 2, "validation_split": 0.34,
                           "preprocessing": [{"op": "tokenize", "column": "text", "vocab_size": 5,
                                              "max_length": 4}]})
    data = load_data_module(spec, tmp_path / "gen")
    assert data.INPUT_SHAPE == (4,) and data.INPUT_DTYPE == "int64"
    splits = data.load_splits()
    idx = data.split_indices(len(texts))
    all_ids = np.zeros((len(texts), 4), np.int64)
    all_ids[idx["train"]] = splits["train"].x
    all_ids[idx["val"]] = splits["val"].x
    # recompute the rule independently: top vocab_size-2 training words by count, ties by word
    import collections
    import re

    words = [[w for w in re.split(r"\W+", t.lower()) if w] for t in texts]
    counts = collections.Counter(w for i in idx["train"] for w in words[i])
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    vocab = {w: i + 2 for i, (w, _) in enumerate(top)}
    for row, ws in enumerate(words):
        expect = [vocab.get(w, 1) for w in ws[:4]] + [0] * (4 - min(4, len(ws)))
        assert list(all_ids[row]) == expect


# --------------------------------------------------------------------------- Parquet


def test_parquet_load_and_null(tmp_path: Path) -> None:
    write_parquet(tmp_path / "t.parquet", {"a": [float(i) for i in range(12)], "b": list(range(12)),
                                           "note": [f"n{i}" for i in range(12)],
                                           "label": ["x", "y", "z"] * 4})
    data = load_data_module(csv_spec(str(tmp_path / "t.parquet")), tmp_path / "g1")
    splits = data.load_splits()
    assert data.FORMAT == "parquet" and splits["train"].x.shape == (9, 2) and data.CLASS_NAMES == ["x", "y", "z"]
    write_parquet(tmp_path / "null.parquet", {"a": [1.0, None, 3.0], "b": [1, 2, 3], "label": [0, 1, 2]})
    data = load_data_module(csv_spec(str(tmp_path / "null.parquet")), tmp_path / "g2")
    with pytest.raises(data.DataError, match=r"null.parquet row 2, column 'a': empty is not a finite number"):
        data.load_splits()
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    data = load_data_module(csv_spec(str(tmp_path / "junk.parquet")), tmp_path / "g3")
    with pytest.raises(data.DataError, match="junk.parquet: cannot read the Parquet file"):
        data.load_splits()


# --------------------------------------------------------------------------- NPZ


def test_npz_images_channels_last_and_dtype_scale(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)
    np.savez(tmp_path / "img.npz", x=x, y=np.arange(20) % 4)
    spec = spec_with_data({"source": str(tmp_path / "img.npz"), "num_classes": 4, "input_shape": [3, 8, 8],
                           "preprocessing": [{"op": "scale"}], "validation_split": 0.2})
    data = load_data_module(spec, tmp_path / "gen")
    splits = data.load_splits()
    idx = data.split_indices(20)["train"]
    np.testing.assert_allclose(splits["train"].x, x[idx].transpose(0, 3, 1, 2) / 255.0, rtol=1e-6)


def test_npz_target_key_grey_images_and_resize(tmp_path: Path) -> None:
    np.savez(tmp_path / "g.npz", x=np.ones((10, 8, 8), np.float32), digit=(np.arange(10) % 2)[:, None])
    spec = spec_with_data({"source": str(tmp_path / "g.npz"), "target": "digit", "num_classes": 2, "input_shape": [1, 16, 16],
                           "preprocessing": [{"op": "resize", "size": [16, 16]}]})
    data = load_data_module(spec, tmp_path / "gen")
    splits = data.load_splits()
    assert splits["train"].x.shape == (9, 1, 16, 16) and np.allclose(splits["train"].x, 1.0)
    assert splits["train"].y.shape == (9,) and splits["train"].y.dtype == np.int64


def test_npz_errors(tmp_path: Path) -> None:
    np.savez(tmp_path / "small.npz", x=np.zeros((10, 1, 8, 8), np.float32), y=np.zeros(10, np.int64))
    data = load_data_module(spec_with_data({"source": str(tmp_path / "small.npz"), "num_classes": 10,
                                            "input_shape": [1, 28, 28]}), tmp_path / "g1")
    with pytest.raises(data.DataError) as err:
        data.load_splits()
    assert "(1, 8, 8)" in str(err.value) and "(1, 28, 28)" in str(err.value) and "resize step" in str(err.value)
    np.savez(tmp_path / "keys.npz", a=np.zeros(3), b=np.zeros(3), c=np.zeros(3))
    data = load_data_module(spec_with_data({"source": str(tmp_path / "keys.npz"), "num_classes": 2, "input_shape": [1]}),
                            tmp_path / "g2")
    with pytest.raises(data.DataError, match=r"expected arrays 'x' and 'y'.*found \['a', 'b', 'c'\]"):
        data.load_splits()
    np.savez(tmp_path / "bad.npz", x=np.zeros((4, 2)), y=np.array([0, 1, 7, 1]))
    truncate(tmp_path / "bad.npz", 0.6)
    data = load_data_module(spec_with_data({"source": str(tmp_path / "bad.npz"), "num_classes": 2, "input_shape": [2]}),
                            tmp_path / "g3")
    with pytest.raises(data.DataError, match="bad.npz: cannot read the .npz archive"):
        data.load_splits()
    np.savez(tmp_path / "range.npz", x=np.zeros((4, 2)), y=np.array([0, 1, 7, 1]))
    data = load_data_module(spec_with_data({"source": str(tmp_path / "range.npz"), "num_classes": 2, "input_shape": [2]}),
                            tmp_path / "g4")
    with pytest.raises(data.DataError, match=r"range.npz: y\[2\]: label 7 is out of range: NUM_CLASSES is 2"):
        data.load_splits()


# --------------------------------------------------------------------------- image folders


def test_image_folder_classes_sorted_and_resized(tmp_path: Path) -> None:
    write_images(tmp_path / "imgs", {"b_dog": 3, "a_cat": 4, "c_eel": 3}, size=(6, 5), mode="RGB")
    (tmp_path / "imgs" / "a_cat" / "notes.txt").write_text("not an image")
    (tmp_path / "imgs" / ".ipynb_checkpoints").mkdir()  # hidden folders are not classes
    spec = spec_with_data({"source": str(tmp_path / "imgs"), "num_classes": 3, "input_shape": [1, 8, 8], "validation_split": 0.2,
                           "preprocessing": [{"op": "resize", "size": [8, 8]}, {"op": "scale", "max_value": 255}]})
    data = load_data_module(spec, tmp_path / "gen")
    assert data.FORMAT == "image_folder"
    splits = data.load_splits()
    assert data.CLASS_NAMES == ["a_cat", "b_dog", "c_eel"]
    x = np.concatenate([splits["train"].x, splits["val"].x])
    y = np.concatenate([splits["train"].y, splits["val"].y])
    assert x.shape == (10, 1, 8, 8) and sorted(np.bincount(y)) == [3, 3, 4]
    # every pixel of an image holds 10 * class + index (grey conversion of equal RGB keeps it)
    assert set(np.round(x[:, 0, 0, 0] * 255).astype(int)) == {0, 1, 2, 3, 10, 11, 12, 20, 21, 22}


def test_image_folder_truncated_png_names_the_file(tmp_path: Path) -> None:
    paths = write_images(tmp_path / "imgs", {"a": 2, "b": 2}, size=(32, 32))
    truncate(paths[3], 0.5)
    spec = spec_with_data({"source": str(tmp_path / "imgs"), "num_classes": 2, "input_shape": [3, 32, 32]})
    data = load_data_module(spec, tmp_path / "gen")
    with pytest.raises(data.DataError) as err:
        data.load_splits()
    assert str(paths[3]) in str(err.value) and "cannot read the image" in str(err.value)


def test_image_folder_size_mismatch_and_too_many_classes(tmp_path: Path) -> None:
    write_images(tmp_path / "imgs", {"a": 2, "b": 2}, size=(6, 6))
    spec = spec_with_data({"source": str(tmp_path / "imgs"), "num_classes": 2, "input_shape": [3, 8, 8]})
    data = load_data_module(spec, tmp_path / "g1")
    with pytest.raises(data.DataError, match=r"img0.png: the image is 6x6 .* add a resize step with size \[8, 8\]"):
        data.load_splits()
    spec = spec_with_data({"source": str(tmp_path / "imgs"), "num_classes": 1, "input_shape": [3, 6, 6]}, out_features=1)
    data = load_data_module(spec, tmp_path / "g2")
    with pytest.raises(data.DataError, match=r"has 2 class folders but the model predicts 1 classes"):
        data.load_splits()


# --------------------------------------------------------------------------- paths


def test_only_the_pinned_absolute_source_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The program reads SOURCE as the absolute path pinned at submission: no relative lookup, no '~',
    no symbolic link put in after the check (issue 10, finding 1)."""
    rows = [[1, 2, 0], [3, 4, 1], [5, 6, 2], [7, 8, 0]]
    write_csv(tmp_path / "sub" / "t.csv", ["a", "b", "label"], rows)
    monkeypatch.chdir(tmp_path)  # a relative source would be found here: it must still be refused
    monkeypatch.setenv("HOME", str(tmp_path))
    for source in ("sub/t.csv", "~/sub/t.csv"):
        data = load_data_module(csv_spec(source), tmp_path / "gen")
        with pytest.raises(data.DataError, match="is not an absolute path") as err:
            data.load_splits()
        assert repr(source) in str(err.value) and "flowtrain run" in str(err.value)

    pinned = tmp_path / "pinned"
    pinned.mkdir()
    write_csv(pinned / "t.csv", ["a", "b", "label"], rows)
    data = load_data_module(csv_spec(str(pinned / "t.csv")), tmp_path / "gen2")
    assert len(data.load_splits()["train"]) == 3
    (pinned / "t.csv").unlink()  # swapped for a link to a file the user may not read
    (pinned / "t.csv").symlink_to(tmp_path / "sub" / "t.csv")
    with pytest.raises(data.DataError, match="now resolves to .*sub/t.csv: a symbolic link"):
        data.load_splits()
    (pinned / "t.csv").unlink()
    with pytest.raises(data.DataError, match="does not exist"):
        data.load_splits()


# --------------------------------------------------------------------------- the template itself

HOSTILE = 'x"\'\'\'""" + __import__("os").system("echo pwned") #\n\u2028\\'


def test_hostile_strings_stay_inside_literals() -> None:
    spec = spec_with_data({"source": HOSTILE + ".csv", "target": HOSTILE, "num_classes": 2, "input_shape": [3],
                           "preprocessing": [{"op": "one_hot", "columns": [HOSTILE, "ok"]}]})
    source = render_data_py(spec)
    tree = ast.parse(source)
    calls = {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute)}
    assert "system" not in calls
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "__import__"]
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and node.targets[0].id in ("SOURCE", "TARGET", "ONE_HOT_COLUMNS")}
    assert constants == {"SOURCE": HOSTILE + ".csv", "TARGET": HOSTILE, "ONE_HOT_COLUMNS": [HOSTILE, "ok"]}


def test_rendered_variants_pass_ruff_and_compile(tmp_path: Path) -> None:
    variants = {
        "digits": zoo.template("mnist_cnn"),
        "iris": spec_with_data({"source": "sklearn:iris", "preprocessing": [{"op": "standardize"}]}),
        "csv": csv_spec("t.csv", input_shape=[5], preprocessing=[{"op": "one_hot", "columns": ["c"]},
                                                                  {"op": "label_encode"}, {"op": "standardize"}]),
        "text": spec_with_data({"source": "t.csv", "num_classes": 2,
                                "preprocessing": [{"op": "tokenize", "max_length": 8}, {"op": "label_encode"}]}),
        "parquet": csv_spec("t.parquet", task="regression", num_classes=None),
        "npz": spec_with_data({"source": "t.npz", "num_classes": 2, "input_shape": [1, 8, 8],
                               "preprocessing": [{"op": "resize", "size": [8, 8]}, {"op": "scale"},
                                                 {"op": "normalize"}, {"op": "label_encode"}]}),
        "images": spec_with_data({"source": "imgs", "num_classes": 2, "input_shape": [3, 8, 8],
                                  "preprocessing": [{"op": "resize", "size": [8, 8]}, {"op": "scale"}],
                                  "augmentation": [{"op": "random_crop"}, {"op": "horizontal_flip"}]}),
    }
    for name, spec in variants.items():
        (tmp_path / f"data_{name}.py").write_text(render_data_py(spec))
    result = subprocess.run([str(RUFF), "check", "--no-cache", str(tmp_path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = subprocess.run([sys.executable, "-m", "py_compile", *map(str, sorted(tmp_path.glob("*.py")))],
                              capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr


def test_augmentation_plan_and_context_types() -> None:
    spec = spec_with_data({"source": "sklearn:digits", "input_shape": [1, 8, 8],
                           "augmentation": [{"op": "random_crop", "padding": 2}, {"op": "horizontal_flip"},
                                            {"op": "rotation", "degrees": 10}, {"op": "color_jitter"},
                                            {"op": "gaussian_noise", "std": 0.1}]}, out_features=10)
    plan = augmentation_plan(spec)
    assert plan == [{"op": "random_crop", "padding": 2}, {"op": "horizontal_flip", "p": 0.5},
                    {"op": "rotation", "degrees": 10.0}, {"op": "color_jitter", "brightness": 0.2, "contrast": 0.2},
                    {"op": "gaussian_noise", "std": 0.1}]
    assert isinstance(plan[2]["degrees"], float) and isinstance(plan[0]["padding"], int)
    ctx = data_context(spec, validate(spec))
    assert ctx["data_augmentation"] == plan and ctx["data_input_shape"] == (1, 8, 8)
    assert ctx["data_num_classes"] == 10 and ctx["data_format"] == "builtin"


def test_num_classes_from_the_output_layer() -> None:
    spec = spec_with_data({"source": "x.csv", "input_shape": [4]}, out_features=7)
    assert data_context(spec, validate(spec))["data_num_classes"] == 7


def test_formats_and_rejected_combinations() -> None:
    assert [resolve_format(s) for s in ("a/b.CSV", "t.parquet", "t.pq", "x.npz", "imgs/train", "sklearn:iris")] == [
        "csv", "parquet", "parquet", "npz", "image_folder", "builtin"]
    with pytest.raises(SpecError, match="cannot tell the data format"):
        resolve_format("notes.txt")
    assert resolve_format("notes.txt", "csv") == "csv"
    spec = spec_with_data({"source": "x.npz", "num_classes": 2, "input_shape": [4],
                           "preprocessing": [{"op": "tokenize"}]})
    with pytest.raises(SpecError, match=r"data.preprocessing\[0\].*tokenize applies to a text column"):
        data_context(spec)
    spec = spec_with_data({"source": "sklearn:iris", "preprocessing": [{"op": "resize", "size": [4, 4]}]})
    with pytest.raises(SpecError, match="resize needs images"):
        data_context(spec)
