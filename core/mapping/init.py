"""FlowTrain's initialisers, read from the op catalogue, for the frameworks whose layers are initialised
after construction (torch, paddle).

Each op declares how every weight starts (:class:`core.ops.Weight`: ``uniform`` U(±1/√fan_in),
``normal`` N(0, std), ``ones``, ``zeros``); each converter binds every canonical weight to the
framework parameter that holds it. :func:`init_calls` joins the two into the statements of the
generated ``reset_parameters``: one per layer when all its parameters share a uniform
initialiser (``uniform_fan_in(model.conv1, 27)``), else one per sub-layer or parameter
(``ones(model.bn1.weight)``). Statistics (buffers) keep the framework's own start, which is the
declared one (zero mean, unit variance). Keras takes initialisers in its layers' constructors;
its converters read the same declarations (:func:`core.mapping.keras._common.initializer`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.mapping.base import MappedModel, ident
from core.ops import Weight
from core.validate import Analysis
from core.weights import node_weights


@dataclass(frozen=True)
class InitCall:
    """``target`` (an attribute path under the model: a layer, a sub-layer or one parameter) starts
    as ``weight.init`` says; a layer or sub-layer stands for every parameter it holds."""

    target: str
    weight: Weight


def _rule(w: Weight) -> tuple[str, int, float]:
    return (w.init, w.fan_in, w.std)


def _calls(prefix: str, params: list[tuple[str, Weight]]) -> list[InitCall]:
    """Initialise the parameters under ``prefix`` with as few statements as their declarations allow
    (a buffer under a layer keeps that layer from being initialised whole)."""
    rules = {_rule(w) for _, w in params}
    if len(rules) == 1 and params[0][1].init == "uniform" and not any(w.buffer for _, w in params):
        return [InitCall(prefix, params[0][1])]
    children: dict[str, list[tuple[str, Weight]]] = {}
    for target, w in params:
        child = target[len(prefix) + 1:].split(".", 1)[0]
        children.setdefault(f"{prefix}.{ident(child)}", []).append((target, w))
    calls: list[InitCall] = []
    for path, items in children.items():
        if len(items) == 1 and items[0][0] == path:
            if not items[0][1].buffer:
                calls.append(InitCall(path, items[0][1]))
        else:
            calls += _calls(path, items)
    return calls


def init_calls(model: MappedModel, analysis: Analysis) -> list[InitCall]:
    """The initialiser statements of the whole model, layer by layer in graph order."""
    calls: list[InitCall] = []
    for layer in model.layers:
        params: dict[str, Weight] = {}  # framework parameter -> its declaration (paddle splits in_proj in three)
        for binding in layer.weights:  # a use of a block binds the weights of all its nodes
            node_id, name = binding.canonical.split("/", 1)
            params.setdefault(binding.target, node_weights(analysis, analysis.nodes[node_id])[name])
        if any(not w.buffer for w in params.values()):
            calls += _calls(ident(layer.var), list(params.items()))
    return calls
