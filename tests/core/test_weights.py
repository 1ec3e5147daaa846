"""Canonical weights: the names, shapes and initialisers ops declare, collected per graph and drawn at random."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core import zoo
from core.validate import validate
from core.weights import canonical_shapes, canonical_weights, random_canonical
from tests.op_cases import flatten_linear_spec, specs

SPECS = {**{f"zoo:{e.name}": e.build for e in zoo.entries()},
         **{f"op:{k}": (lambda s=s: s) for k, s in {**specs(), "flatten-linear": flatten_linear_spec()}.items()}}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_trainable_canonical_sizes_add_up_to_the_parameter_count(name: str) -> None:
    analysis = validate(SPECS[name]())
    weights = canonical_weights(analysis)
    assert sum(math.prod(w.shape) for w in weights.values() if not w.buffer) == analysis.total_params
    for node in analysis.nodes.values():  # and node by node
        own = sum(math.prod(w.shape) for k, w in weights.items() if k.startswith(f"{node.id}/") and not w.buffer)
        assert own == node.n_params, node.id


def test_keys_and_shapes_follow_torch() -> None:
    shapes = canonical_shapes(validate(zoo.template("mnist_cnn")))
    assert shapes["conv2d1/weight"] == (32, 1, 3, 3) and shapes["linear1/weight"] == (128, 9216)
    bn = canonical_shapes(validate(specs()["BatchNorm2d"]))
    assert bn == {"node/weight": (4,), "node/bias": (4,), "node/running_mean": (4,), "node/running_var": (4,)}
    bn_weights = canonical_weights(validate(specs()["BatchNorm2d"]))
    assert bn_weights["node/running_var"].buffer and not bn_weights["node/weight"].buffer
    lstm = canonical_shapes(validate(specs()["LSTM-stacked-sequences"]))
    assert lstm["node/weight_ih_l1_reverse"] == (16, 8) and lstm["node/bias_hh_l0"] == (16,)


def test_random_canonical_is_reproducible_float32_with_positive_variances() -> None:
    analysis = validate(zoo.template("resnet18_cifar"))
    a, b = random_canonical(analysis, seed=3), random_canonical(analysis, seed=3)
    assert a.keys() == canonical_shapes(analysis).keys()
    for key, value in a.items():
        assert value.dtype == np.float32 and value.shape == canonical_shapes(analysis)[key]
        assert np.array_equal(value, b[key])
        if key.endswith("running_var"):
            assert value.min() > 0
    assert not np.array_equal(a["linear1/weight"], random_canonical(analysis, seed=4)["linear1/weight"])


def test_weights_that_no_longer_fit_name_every_node_in_one_problem(tmp_path) -> None:
    from core.weights import init_weight_problems, npz_shapes

    spec = zoo.template("mnist_cnn")
    analysis = validate(spec)
    given = random_canonical(analysis)
    path = tmp_path / "w.npz"
    node = next(k for k in given if k.endswith("/weight")).split("/")[0]
    np.savez(path, **{k: v for k, v in given.items() if not k.startswith(f"{node}/")})  # one node dropped
    assert npz_shapes(path) == {k: v.shape for k, v in given.items() if not k.startswith(f"{node}/")}
    assert init_weight_problems(analysis, str(path)) == []  # a node the file does not hold starts afresh
    bad = dict(given)
    first = node  # the graph's first node with weights (a conv: its id sorts before "gone")
    bad[f"{first}/weight"] = np.zeros((1, 1), np.float32)
    bad["gone/weight"] = np.zeros(3, np.float32)  # a node deleted since
    np.savez(path, **bad)
    [problem] = init_weight_problems(analysis, str(path))
    assert problem.location == "training.init_weights" and f"do not fit 2 node(s): {first}, gone" in problem.message
    assert "(1, 1) where the graph has" in (problem.received or "") and "gone (not a node" in (problem.received or "")
    path.write_bytes(b"not a zip")
    [problem] = init_weight_problems(analysis, str(path))
    assert "cannot be read as canonical weights" in problem.message
