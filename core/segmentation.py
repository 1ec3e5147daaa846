"""Segmentation (``data.task: segmentation``): what the spec must say, checked without reading the data.

A segmentation model predicts one score per class for every pixel: its output is ``(num_classes, H, W)``
for an input image ``(C, H, W)``, and its labels are masks of class indices ``(H, W)``. The checks on the
mask files themselves (sizes, values) read the data and live in :mod:`core.segmentation_data`.
"""

from __future__ import annotations

from core import datasets
from core.errors import Problem, SpecError
from core.ops import Tensor
from core.spec import PipelineSpec

LOSSES = ("cross_entropy", "cross_entropy_dice")  # per pixel; the second plus the soft Dice loss
FORMATS = ("image_folder", "npz", "npy", "webdataset")
IMAGE_STEPS = ("scale", "normalize")  # a resize would need the masks resized alike (nearest): not yet


def spec_problems(spec: PipelineSpec, sample: Tensor | None, prediction: Tensor | None,
                  output_id: str | None) -> list[Problem]:
    """Every problem of a segmentation spec's data and training layers against the graph's input
    ``sample`` and its ``prediction`` (None where the graph could not infer them); [] for other tasks
    but an ``ignore_index`` set for them."""
    data, training = spec.data, spec.training
    if data.task != "segmentation":
        others = []
        if data.ignore_index is not None:
            others.append(Problem("data.ignore_index", f"is for segmentation masks, and data.task is {data.task}",
                                  received=str(data.ignore_index), expected="no ignore_index",
                                  fix="remove ignore_index, or set data.task to segmentation"))
        if training.loss == "cross_entropy_dice":
            others.append(Problem("training.loss", f"the Dice loss scores masks, and data.task is {data.task}",
                                  received=training.loss, expected="cross_entropy, bce_with_logits, mse or mae",
                                  fix="choose cross_entropy, or set data.task to segmentation"))
        return others
    problems: list[Problem] = []
    classes = datasets.num_classes(data)
    if data.source.startswith("sklearn:"):
        problems.append(Problem("data.source", "a built-in dataset has no masks", received=data.source,
                                expected="an image folder with a mask folder, or .npz/.npy with per-pixel labels",
                                fix="choose your segmentation data, or set data.task to classification"))
    if classes is None:
        problems.append(Problem("data.num_classes", "segmentation needs the number of classes", received="none",
                                expected="the number of classes the masks index (2 or more)",
                                fix="set data.num_classes (the masks' largest class index + 1)"))
    from core.mapping.data import resolve_format  # imports the validator: not at module level

    try:
        fmt = resolve_format(data.source, data.format)
    except SpecError:
        fmt = None  # the data layer's own problem
    if fmt not in (None, "builtin", *FORMATS):
        problems.append(Problem("data.format", f"segmentation reads images with masks, not {fmt}", received=fmt,
                                expected=" or ".join(FORMATS), fix="store the images and their masks as an image "
                                "folder with a mask folder, .npz, .npy or WebDataset shards (docs/segmentation.md)"))
    for i, step in enumerate(data.preprocessing):
        if step.op not in IMAGE_STEPS:
            problems.append(Problem(f"data.preprocessing[{i}]", f"{step.op} does not apply to segmentation images",
                                    received=step.op, expected=" or ".join(IMAGE_STEPS),
                                    fix="remove the step (masks keep their size: give the Input the images' "
                                    "size)"))
    if training.loss not in LOSSES:
        problems.append(Problem("training.loss", f"{training.loss} does not score masks of class indices",
                                received=training.loss, expected=" or ".join(LOSSES),
                                fix="choose cross_entropy (per pixel) or cross_entropy_dice"))
    if sample is not None and len(sample.shape) != 3:
        problems.append(Problem("data.task", "segmentation needs images (C, H, W)", received=f"samples {sample}",
                                fix="use image data, or set data.task to classification"))
    elif sample is not None and prediction is not None and output_id and classes:
        want = Tensor((classes, *sample.shape[1:]))
        if prediction.shape != want.shape:
            problems.append(Problem(
                f"model.nodes[{output_id}].inputs", "a segmentation model predicts every class at every pixel",
                output_id, received=str(prediction), expected=f"{want} ({classes} classes, the input's height "
                "and width)", fix=f"end with a 1×1 Conv2d of out_channels {classes} at the input's resolution "
                "(upsample or pad back to it)"))
    return problems
