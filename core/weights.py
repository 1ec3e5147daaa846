"""Canonical weights: the names and shapes every framework's ``model.py`` agrees on.

Canonical weights are torch's layout of the logical (channels-first) model, keyed
``"<node id>/<name>"``. Each op declares its own (:meth:`core.ops.Op.weights`: name, shape and
initialiser); this module collects them for a whole graph. Each framework's generated
``model.py`` converts them into its own parameters (``load_canonical_weights``) and back
(``canonical_weights``), which is how :mod:`core.equivalence` gives all frameworks the same weights.

Pure numpy: no framework is imported here.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

from core.errors import CommandError, Problem
from core.ops import REGISTRY, Weight
from core.validate import Analysis, NodeInfo

Shapes = dict[str, tuple[int, ...]]


def node_weights(analysis: Analysis, node: NodeInfo) -> dict[str, Weight]:
    """``{name: Weight}`` of one node, as its op declares them (empty for weight-free ops)."""
    ins = [analysis.nodes[s].output for s in node.inputs]
    return REGISTRY.get(node.op).weights(ins, node.params)


def node_shapes(analysis: Analysis, node: NodeInfo) -> Shapes:
    """``{name: shape}`` of one node's canonical weights (empty for weight-free ops)."""
    return {name: w.shape for name, w in node_weights(analysis, node).items()}


def canonical_weights(analysis: Analysis) -> dict[str, Weight]:
    """``{"<node>/<name>": Weight}`` for the whole graph, in graph order."""
    return {f"{node.id}/{name}": w for node in analysis.nodes.values()
            for name, w in node_weights(analysis, node).items()}


def canonical_shapes(analysis: Analysis) -> Shapes:
    """``{"<node>/<name>": shape}`` for the whole graph, in graph order."""
    return {key: tuple(int(d) for d in w.shape) for key, w in canonical_weights(analysis).items()}


def random_canonical(analysis: Analysis, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 canonical weights whose magnitudes keep activations well scaled.

    Each weight is drawn from its declared initialiser, made non-trivial where that is a
    constant or tiny: ``uniform`` weights U(±1/√fan_in) as declared; ``normal`` ones N(0, std)
    with std at least 0.1, but as declared where the std is scaled to a fan-in (He's N(0, 2/fan_in)
    of a convolution with ``init: he``: at 0.1, each layer of fan-in 1152 would grow the activations'
    mean square ~6×); norm scales and running variances U(0.5, 1.5) (strictly positive),
    norm shifts U(±0.2) and running means N(0, 0.2). So a mapper that drops or misplaces a
    weight shows up as a difference.
    """
    rng = np.random.default_rng(seed)
    return {key: _draw(rng, w).astype(np.float32) for key, w in canonical_weights(analysis).items()}


def _draw(rng: np.random.Generator, w: Weight) -> np.ndarray:
    if w.init == "ones":
        return rng.uniform(0.5, 1.5, w.shape)
    if w.init == "zeros":
        return rng.normal(0.0, 0.2, w.shape) if w.buffer else rng.uniform(-0.2, 0.2, w.shape)
    if w.init == "normal":
        return rng.normal(0.0, w.std if w.fan_in else max(w.std, 0.1), w.shape)
    bound = 1.0 / math.sqrt(w.fan_in)
    return rng.uniform(-bound, bound, w.shape)


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Canonical weights from an ``.npz`` file (``numpy.savez``, keys ``"<node id>/<name>"``).

    Pickled objects are refused (``allow_pickle=False``): a weights file is data, never code.
    """
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("it holds one unnamed array, not named weights (write it with numpy.savez)")
        with data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CommandError(f"{path} cannot be read as canonical weights (.npz): {exc}") from None


def npz_shapes(path: str | Path) -> Shapes:
    """``{key: shape}`` of an ``.npz`` file's arrays, read from each array's header only (a 250 MB file
    is not loaded to learn its shapes)."""
    try:
        with zipfile.ZipFile(path) as archive:
            shapes: Shapes = {}
            for name in archive.namelist():
                if not name.endswith(".npy"):
                    continue
                with archive.open(name) as member:
                    version = np.lib.format.read_magic(member)
                    header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                              else np.lib.format.read_array_header_2_0)(member)
                shapes[name[:-4]] = tuple(int(d) for d in header[0])
            return shapes
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CommandError(f"{path} cannot be read as canonical weights (.npz): {exc}") from None


def by_node(shapes: Shapes) -> dict[str, Shapes]:
    """``{node id: {weight name: shape}}`` of canonical keys ``"<node id>/<name>"``."""
    out: dict[str, Shapes] = {}
    for key, shape in shapes.items():
        node, _, name = key.rpartition("/")
        out.setdefault(node, {})[name] = shape
    return out


def _dims(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def weight_mismatches(expected: Shapes, found: Shapes) -> dict[str, str]:
    """``{node id: why}`` for every node whose weights in ``found`` (a weights file's shapes) do not fit
    the graph's ``expected`` shapes: a node no longer in the graph (or without weights now), a different
    set of weights, or a different shape. A node of the graph the file does not hold is not a mismatch:
    it starts from its own initialiser."""
    want, have = by_node(expected), by_node(found)
    out: dict[str, str] = {}
    for node, weights in have.items():
        graph = want.get(node)
        if graph is None:
            out[node] = "not a node with weights in the graph now"
        elif set(graph) != set(weights):
            out[node] = f"holds {', '.join(sorted(weights))}; the graph has {', '.join(sorted(graph))}"
        else:
            wrong = [f"{name} {_dims(weights[name])} where the graph has {_dims(graph[name])}"
                     for name in sorted(weights) if tuple(weights[name]) != tuple(graph[name])]
            if wrong:
                out[node] = "; ".join(wrong)
    return out


def mismatch_problem(mismatches: dict[str, str], path: str) -> Problem:
    """One problem at ``training.init_weights`` naming every node whose imported weights do not fit."""
    nodes = sorted(mismatches)
    shown = ", ".join(f"{n} ({mismatches[n]})" for n in nodes[:20]) + (f", … {len(nodes) - 20} more"
                                                                       if len(nodes) > 20 else "")
    return Problem("training.init_weights",
                   f"the starting weights in {path} do not fit {len(nodes)} node(s): {', '.join(nodes)}",
                   received=shown, expected="each covered node's weights with the shapes the graph gives it",
                   fix="drop the starting weights of these nodes (the training layer's 'Drop weights' button), "
                       "or undo the edit that changed them")


def init_weight_problems(analysis: Analysis, path: str | None) -> list[Problem]:
    """The problems of ``training.init_weights`` at ``path`` (resolved) against the graph: a file that
    cannot be read, or weights that do not fit their nodes (all named in one problem). ``[]`` when fine."""
    if path is None:
        return []
    try:
        found = npz_shapes(path)
    except CommandError as err:
        return [Problem("training.init_weights", str(err), received=repr(path)[:300],
                        expected="canonical weights written by numpy.savez (e.g. an ONNX import's)",
                        fix="point training.init_weights at the weights file, or clear it")]
    mismatches = weight_mismatches(canonical_shapes(analysis), found)
    return [mismatch_problem(mismatches, path)] if mismatches else []
