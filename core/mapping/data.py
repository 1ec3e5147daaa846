"""The data section of a spec → the context that renders ``templates/common/data.py.j2``.

The generated ``data.py`` is framework-free and identical for torch, keras and paddle;
each framework's ``render_context`` merges :func:`data_context` into its own context.
Every value here is typed (str, int, float, bool, tuples, lists, dicts of those) and
reaches the code only through the ``py`` filter, so a hostile source path, column name
or target can only ever become a string literal. Keys are prefixed ``data_`` so they
cannot collide with a framework's own keys.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from core import datasets, token_stream
from core.errors import Problem, SpecError
from core.spec import (
    LabelEncode,
    Normalize,
    OneHot,
    PipelineSpec,
    Resize,
    ScaleToUnit,
    Standardize,
    Tokenize,
)
from core.validate import Analysis

# File name endings → format, for ``data.format == "auto"`` (decided at generation time,
# so the generated program never guesses).
SUFFIX_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npz": "npz", ".npy": "npy",
                  ".tar": "webdataset"}
TABLE_FORMATS = ("csv", "parquet")


def resolve_format(source: str, declared: str = "auto") -> str:
    """The concrete format of ``source``: builtin, csv, parquet, npz, npy, image_folder or webdataset.

    A path without a file-name suffix is taken to be an image folder. Raises
    :class:`SpecError` when the suffix is unknown and no format was declared.
    """
    if source.startswith("sklearn:"):
        return "builtin"
    if declared != "auto":
        return declared
    suffix = PurePosixPath(source).suffix.lower()
    if suffix in SUFFIX_FORMATS:
        return SUFFIX_FORMATS[suffix]
    if suffix == "":
        return "image_folder"
    raise SpecError([Problem(
        "data.format", "cannot tell the data format from the file name", received=repr(source),
        expected="a name ending in .csv, .parquet, .npz, .npy, .tar, a folder of class sub-folders, or sklearn:NAME",
        fix="set data.format to csv, parquet, npz, npy, image_folder or webdataset (a folder of .tar shards)")])


def augmentation_plan(spec: PipelineSpec) -> list[dict[str, Any]]:
    """The augmentation ops as plain dicts with typed values, in spec order.

    e.g. ``[{"op": "random_crop", "padding": 4}, {"op": "horizontal_flip", "p": 0.5}]``.
    Each framework applies them with its own pipeline (train split only).
    """
    plan = []
    for aug in spec.data.augmentation:
        step: dict[str, Any] = {}
        for key, value in aug.model_dump().items():
            step[key] = float(value) if isinstance(value, float) else value
        plan.append(step)
    return plan


def data_context(spec: PipelineSpec, analysis: Analysis | None = None) -> dict[str, Any]:
    """Everything ``data.py.j2`` needs; raises :class:`SpecError` for combinations it cannot load."""
    data = spec.data
    lm = data.task == "language_modeling"  # a token stream (core.token_stream), whatever its file name
    fmt = "tokens" if lm else resolve_format(data.source, data.format)
    info = datasets.builtin(data.source)
    problems: list[Problem] = []
    if data.source.startswith("sklearn:") and info is None:
        problems.append(Problem("data.source", "unknown built-in dataset", received=repr(data.source),
                                expected="one of " + ", ".join(datasets.BUILTIN)))
    kind = _kind(fmt, info)
    input_shape, input_dtype = _input(spec, analysis)
    steps, ops = _steps(spec, fmt, kind, info, problems)
    if problems:
        raise SpecError(problems)
    resize_steps = [s for s in steps if s["op"] == "resize"]
    tokenize = next((s for s in steps if s["op"] == "tokenize"), None)
    one_hot_columns: list[str] = []
    for step in steps:
        if step["op"] == "one_hot":
            one_hot_columns += [c for c in step["columns"] if c not in one_hot_columns]
    return {
        "data_source": data.source,
        "data_format": fmt,
        "data_kind": kind,
        "data_task": data.task,
        "data_num_classes": _num_classes(spec, analysis),
        "data_input_shape": input_shape,
        "data_input_dtype": input_dtype,
        "data_batch_size": int(data.batch_size),
        "data_seed": int(spec.training.seed),
        "data_validation_split": float(data.validation_split),
        "data_test_split": float(data.test_split),
        "data_shuffle": bool(data.shuffle),
        "data_num_workers": int(data.num_workers),
        "data_loading": data.loading,
        "data_statistics": any(_computed(step) for step in steps),
        "data_target": data.target,
        "data_ignore_index": data.ignore_index,  # segmentation (_segmentation.py.j2)
        "data_mask_folder": data.mask_folder,
        "data_steps": steps,
        "data_ops": sorted(ops),
        "data_load_size": tuple(resize_steps[-1]["size"]) if resize_steps else None,
        "data_one_hot_columns": one_hot_columns,
        "data_tokenize": tokenize,
        "data_label_encode": any(isinstance(p, LabelEncode) for p in data.preprocessing),
        "data_augmentation": augmentation_plan(spec),
        # set: data.py holds open_init_weights (opens it only at its pinned real path) for train.py
        "data_init_weights": None if spec.training.init_weights is None else str(spec.training.init_weights),
        # language_modeling: windows of block_size + 1 tokens of a stream held as data_tokens_kind
        "data_block_size": int(data.block_size) if lm and data.block_size else None,
        "data_vocab_size": int(data.vocab_size) if lm and data.vocab_size else None,
        "data_tokens_kind": token_stream.kind(data.source) if lm else None,
    }


def _computed(step: dict[str, Any]) -> bool:
    """Whether the step takes statistics from the training data (streamed sources: from a sample)."""
    return (step["op"] in ("standardize", "tokenize") or (step["op"] == "scale" and step["max_value"] is None)
            or (step["op"] == "normalize" and step["mean"] is None))


def _kind(fmt: str, info: datasets.BuiltinDataset | None) -> str:
    if fmt == "builtin":
        return info.kind if info is not None else "tabular"
    if fmt in ("image_folder", "webdataset"):
        return "image"
    if fmt in TABLE_FORMATS:
        return "tabular"
    return "array"


def _input(spec: PipelineSpec, analysis: Analysis | None) -> tuple[tuple[int, ...], str]:
    """The Input node's shape/dtype from the validated analysis, else what the data layer declares."""
    if analysis is not None and analysis.input_id and analysis.input_id in analysis.nodes:
        tensor = analysis.nodes[analysis.input_id].output
        return tuple(int(d) for d in tensor.shape), str(tensor.dtype)
    known = datasets.model_input(spec.data)
    if known is None:
        raise SpecError([Problem("data.input_shape", "the shape of one sample is not known",
                                 fix="set data.input_shape or the Input node's shape, or probe the data source")])
    return tuple(int(d) for d in known[0]), known[1]


def _num_classes(spec: PipelineSpec, analysis: Analysis | None) -> int | None:
    if spec.data.task == "segmentation":  # required there (core/segmentation.py)
        return datasets.num_classes(spec.data)
    if spec.data.task != "classification":
        return None
    known = datasets.num_classes(spec.data)
    if known is not None:
        return int(known)
    if analysis is not None and analysis.output_id and analysis.output_id in analysis.nodes:
        shape = analysis.nodes[analysis.output_id].output.shape
        if len(shape) == 1:
            # one logit with binary cross-entropy means two classes
            return 2 if shape[0] == 1 and spec.training.loss == "bce_with_logits" else int(shape[0])
    raise SpecError([Problem("data.num_classes", "the number of classes is not known",
                             fix="set data.num_classes, or end the model in a Linear with one output per class")])


def _steps(spec: PipelineSpec, fmt: str, kind: str, info: datasets.BuiltinDataset | None,
           problems: list[Problem]) -> tuple[list[dict[str, Any]], set[str]]:
    """Preprocessing steps as typed dicts in spec order, with the checks that need no data."""
    steps: list[dict[str, Any]] = []
    ops: set[str] = set()
    tokenized = any(isinstance(p, Tokenize) for p in spec.data.preprocessing)
    for i, step in enumerate(spec.data.preprocessing):
        loc = f"data.preprocessing[{i}]"
        ops.add(step.op)
        if isinstance(step, Resize):
            if kind == "tabular":
                problems.append(Problem(loc, "resize needs images", received=f"{spec.data.source} (tabular)",
                                        fix="remove the resize step"))
            steps.append({"op": "resize", "size": (int(step.size[0]), int(step.size[1]))})
        elif isinstance(step, ScaleToUnit):
            max_value = step.max_value
            if max_value is None and info is not None:
                max_value = info.max_value
            steps.append({"op": "scale", "max_value": None if max_value is None else float(max_value)})
        elif isinstance(step, Normalize):
            if (step.mean is None) != (step.std is None):
                problems.append(Problem(loc, "give both mean and std, or neither (computed from the training split)",
                                        received=f"mean={step.mean}, std={step.std}"))
            steps.append({"op": "normalize",
                          "mean": None if step.mean is None else [float(v) for v in step.mean],
                          "std": None if step.std is None else [float(v) for v in step.std]})
        elif isinstance(step, Standardize):
            steps.append({"op": "standardize"})
        elif isinstance(step, OneHot):
            if fmt not in TABLE_FORMATS:
                problems.append(Problem(loc, "one_hot applies to CSV/Parquet columns", received=fmt,
                                        fix="remove the one_hot step"))
            steps.append({"op": "one_hot", "columns": [str(c) for c in step.columns]})
        elif isinstance(step, LabelEncode):
            steps.append({"op": "label_encode"})
        elif isinstance(step, Tokenize):
            if fmt not in TABLE_FORMATS:
                problems.append(Problem(loc, "tokenize applies to a text column of a CSV/Parquet file", received=fmt,
                                        fix="use a CSV or Parquet source, or remove the tokenize step"))
            steps.append({"op": "tokenize", "column": str(step.column), "vocab_size": int(step.vocab_size),
                          "max_length": int(step.max_length), "lowercase": bool(step.lowercase)})
        if tokenized and step.op in ("resize", "scale", "normalize", "standardize", "one_hot"):
            problems.append(Problem(loc, f"{step.op} cannot be combined with tokenize (the model gets token ids)",
                                    received=step.op, fix=f"remove the {step.op} step"))
    return steps, ops
