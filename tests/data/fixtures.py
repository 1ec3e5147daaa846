"""Small data sources written on demand (into tmp_path) and a loader for generated ``data.py`` modules.

Nothing here is committed data: every test writes the few kilobytes it needs.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import itertools
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from core import datasets
from core.codegen import environment
from core.mapping.data import data_context
from core.spec import PipelineSpec
from core.validate import Analysis

_COUNTER = itertools.count()


def spec_with_data(data: dict[str, Any], out_features: int | None = None, seed: int = 0) -> PipelineSpec:
    """A spec whose model is Input → Flatten → Linear → Output, with the given data section."""
    builtin = datasets.builtin(str(data.get("source", "")))
    out_features = out_features or data.get("num_classes") or (builtin.num_classes if builtin else 1)
    nodes = [{"id": "input", "op": "Input", "params": {}},
             {"id": "flat", "op": "Flatten", "params": {}},
             {"id": "fc", "op": "Linear", "params": {"out_features": out_features}},
             {"id": "output", "op": "Output", "params": {}}]
    edges = [{"source": a, "target": b} for a, b in (("input", "flat"), ("flat", "fc"), ("fc", "output"))]
    loss = "mse" if data.get("task") == "regression" else "cross_entropy"
    return PipelineSpec.model_validate({"name": "t", "data": data, "model": {"nodes": nodes, "edges": edges},
                                       "training": {"loss": loss, "seed": seed}})


def render_data_py(spec: PipelineSpec, analysis: Analysis | None = None) -> str:
    return environment("torch").get_template("data.py.j2").render(**data_context(spec, analysis))


def load_data_module(spec: PipelineSpec, folder: Path, analysis: Analysis | None = None, *,
                     root: Path | None = None) -> ModuleType:
    """Render ``data.py`` for ``spec`` into ``folder`` and import it under a unique module name.

    ``root``: the data root a relative ``data.source`` lies under. The generated program reads only
    an absolute (pinned) source, so the source is made absolute against it first, as submission does.
    """
    if root is not None and not Path(spec.data.source).is_absolute():
        data = spec.data.model_copy(update={"source": str(Path(root).resolve() / spec.data.source)})
        spec = spec.model_copy(update={"data": data})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.py"
    path.write_text(render_data_py(spec, analysis), encoding="utf-8")
    name = f"flowtrain_generated_data_{next(_COUNTER)}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    try:
        module_spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


# --------------------------------------------------------------------------- writers


def write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def tabular_rows(n: int = 40, seed: int = 0, classes: int = 3) -> list[list[Any]]:
    """Rows of (a, b, colour, name, label): two numbers, a category, free text, a class index."""
    rng = np.random.default_rng(seed)
    colours = ["red", "green", "blue"]
    return [[round(float(rng.normal()), 4), int(rng.integers(0, 100)), colours[i % 3], f"item {i}", i % classes]
            for i in range(n)]


def write_images(root: Path, classes: dict[str, int], size: tuple[int, int] = (6, 5), mode: str = "RGB",
                 suffix: str = ".png") -> list[Path]:
    """``classes[name]`` images per class folder; pixel values encode (class, index)."""
    from PIL import Image

    paths = []
    for c, (name, count) in enumerate(sorted(classes.items())):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
            pixels = np.full((size[1], size[0], channels), 10 * c + i, np.uint8)
            image = Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels)
            path = root / name / f"img{i}{suffix}"
            image.save(path)
            paths.append(path)
    return paths


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, int(len(data) * keep))])


def write_parquet(path: Path, columns: dict[str, list[Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def write_shards(folder: Path, labels: list[int], per_shard: int, size: int = 6) -> list[np.ndarray]:
    """WebDataset shards shard-000000.tar, ... of PNGs (lossless) with KEY.png and KEY.cls; the pixels."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    pixels = []
    for start in range(0, len(labels), per_shard):
        with tarfile.open(folder / f"shard-{start // per_shard:06d}.tar", "w") as tar:
            for i in range(start, min(start + per_shard, len(labels))):
                image = rng.integers(0, 256, (size, size, 3), np.uint8)
                pixels.append(image)
                buffer = io.BytesIO()
                Image.fromarray(image).save(buffer, "PNG")
                for name, data in ((f"{i:06d}.png", buffer.getvalue()), (f"{i:06d}.cls", str(labels[i]).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return pixels
