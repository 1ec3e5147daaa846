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

from core.errors import CommandError
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
    with std at least 0.1; norm scales and running variances U(0.5, 1.5) (strictly positive),
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
        return rng.normal(0.0, max(w.std, 0.1), w.shape)
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
