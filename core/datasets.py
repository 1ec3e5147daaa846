"""What the data layer yields per sample, known without reading the data.

The built-in datasets ship with scikit-learn, so their sizes are facts; for files,
the portal's data probe records ``size`` and ``sample_shape`` in the spec. From either,
:func:`model_input` derives the tensor the model receives after preprocessing, which the
validator compares with the Input node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from core.spec import DataSpec, OneHot, Resize, Tokenize


@dataclass(frozen=True)
class BuiltinDataset:
    name: str
    size: int
    sample_shape: tuple[int, ...]
    num_classes: int
    kind: Literal["image", "tabular"]
    max_value: float  # largest raw feature value (for scaling to [0, 1])
    description: str


BUILTIN: dict[str, BuiltinDataset] = {
    d.name: d
    for d in (
        BuiltinDataset("sklearn:digits", 1797, (1, 8, 8), 10, "image", 16.0,
                       "8×8 grey images of hand-written digits 0–9 (values 0–16)."),
        BuiltinDataset("sklearn:iris", 150, (4,), 3, "tabular", 7.9, "Iris flowers: 4 measurements, 3 species."),
        BuiltinDataset("sklearn:wine", 178, (13,), 3, "tabular", 1680.0, "Wine: 13 chemical measurements, 3 cultivars."),
        BuiltinDataset("sklearn:breast_cancer", 569, (30,), 2, "tabular", 4254.0,
                       "Breast cancer Wisconsin: 30 features, benign/malignant."),
    )
}


def builtin(source: str) -> BuiltinDataset | None:
    return BUILTIN.get(source)


def raw_sample(data: DataSpec) -> tuple[int, ...] | None:
    """Shape of one raw sample: the built-in's, or what the probe recorded."""
    info = builtin(data.source)
    if info is not None:
        return info.sample_shape
    return tuple(data.sample_shape) if data.sample_shape else None


def model_input(data: DataSpec) -> tuple[tuple[int, ...], str] | None:
    """(shape, dtype) of one sample after preprocessing, or None when it cannot be known yet."""
    if data.task == "language_modeling":
        return ((data.block_size,), "int64") if data.block_size else None
    if data.input_shape:
        dtype = "int64" if any(isinstance(p, Tokenize) for p in data.preprocessing) else "float32"
        return tuple(data.input_shape), dtype
    shape = raw_sample(data)
    dtype = "float32"
    for step in data.preprocessing:
        if isinstance(step, Tokenize):
            shape, dtype = (step.max_length,), "int64"
        elif isinstance(step, OneHot) and step.columns:
            return None  # width depends on the distinct values in the file
        elif isinstance(step, Resize) and shape is not None:
            channels = shape[0] if len(shape) == 3 else 1
            shape = (channels, *step.size)
    return (shape, dtype) if shape is not None else None


def num_classes(data: DataSpec) -> int | None:
    if data.num_classes is not None:
        return data.num_classes
    info = builtin(data.source)
    return info.num_classes if info is not None else None
