"""Repeated structure of an imported model is folded into blocks (core/block_folding.py): DenseNet-121
and ResNet-50 open as about 20 nodes, and the folded graph expands back to the very network imported,
its weights under their new ids. That the generated programs compute onnxruntime's function from the
folded specs is tests/frameworks/test_onnx_import.py's (every import is folded)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx
import pytest

from core.block_expansion import expand
from core.block_folding import fold_repeats
from core.onnx_import import import_onnx
from core.spec import PipelineSpec
from core.validate import validate
from core.weights import canonical_shapes
from tests.onnx_models import published, with_random_weights


def _edges(spec: PipelineSpec, rename: dict[str, str]) -> Counter[tuple[str, str, int | None]]:
    return Counter((rename.get(e.source, e.source), rename.get(e.target, e.target), e.port) for e in spec.model.edges)


@pytest.mark.parametrize(("name", "blocks"), [
    ("densenet121", {"dense_layer", "bn_relu_conv_avgpool", "dense_layer_x6", "dense_layer_x12", "dense_layer_x24",
                     "dense_layer_x16"}),
    ("resnet50", {"residual", "residual_proj", "residual_x2", "residual_x3", "residual_x5"}),
])
def test_an_imported_network_folds_into_about_20_nodes_and_expands_back_to_itself(name: str, blocks: set[str]) -> None:
    flat = import_onnx(with_random_weights(onnx.load(published(name))), name=name, fold=False)
    folded = fold_repeats([n.model_dump(exclude_none=True) for n in flat.spec.model.nodes],
                          [e.model_dump(exclude_none=True) for e in flat.spec.model.edges])
    assert len(folded.nodes) <= 20 < len(flat.spec.model.nodes)
    assert {b["name"] for b in folded.blocks} == blocks
    doc = flat.spec.model_dump(mode="json")
    doc["model"] = {"nodes": folded.nodes, "edges": folded.edges, "blocks": folded.blocks}
    spec = PipelineSpec.model_validate(doc)
    analysis = validate(spec)
    assert analysis.total_params == validate(flat.spec).total_params
    expanded = expand(spec)
    before = {folded.renamed.get(n.id, n.id): (n.op, n.params) for n in flat.spec.model.nodes}
    assert {n.id: (n.op, n.params) for n in expanded.model.nodes} == before
    assert _edges(expanded, {}) == _edges(flat.spec, folded.renamed)
    moved = {f"{folded.renamed.get(k.split('/')[0], k.split('/')[0])}/{k.split('/', 1)[1]}": tuple(v.shape)
             for k, v in flat.weights.items()}
    assert canonical_shapes(analysis) == moved


def _chain(channels: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """input → [conv(c) → bn → relu → add(skip)] per c → output."""
    nodes: list[dict[str, Any]] = [{"id": "input", "op": "Input", "params": {"shape": [3, 8, 8]}}]
    edges: list[dict[str, Any]] = []
    last = "input"
    for k, c in enumerate(channels):
        ids = [f"c{k}", f"b{k}", f"r{k}", f"a{k}"]
        nodes += [{"id": ids[0], "op": "Conv2d", "params": {"out_channels": c, "kernel_size": 3, "padding": 1}},
                  {"id": ids[1], "op": "BatchNorm2d", "params": {}}, {"id": ids[2], "op": "ReLU", "params": {}},
                  {"id": ids[3], "op": "Add", "params": {}}]
        edges += [{"source": last, "target": ids[0]}, {"source": ids[0], "target": ids[1]},
                  {"source": ids[1], "target": ids[2]}, {"source": last, "target": ids[3], "port": 0},
                  {"source": ids[2], "target": ids[3], "port": 1}]
        last = ids[3]
    nodes.append({"id": "output", "op": "Output", "params": {}})
    edges.append({"source": last, "target": "output"})
    return nodes, edges


def test_values_that_differ_become_block_parameters_and_equal_ones_stay_literal() -> None:
    folded = fold_repeats(*_chain([3, 3, 3, 3]))
    block, run = folded.blocks
    assert (block["name"], block["params"], run["name"]) == ("residual", [], "residual_x4")
    assert [n["op"] for n in run["nodes"]] == ["residual"] * 4
    assert [n["op"] for n in folded.nodes] == ["Input", "residual_x4", "Output"]
    folded = fold_repeats(*_chain([3, 5, 3]))
    [block] = folded.blocks
    assert block["params"] == [{"name": "conv1_out_channels", "type": "int", "default": 3}]
    assert [n["params"] for n in folded.nodes if n["op"] == "residual"] == [{"conv1_out_channels": c} for c in (3, 5, 3)]
    assert folded.renamed["c1"] == "residual_2__conv1"


def test_a_graph_with_nothing_repeated_comes_back_unchanged() -> None:
    nodes, edges = _chain([3])
    folded = fold_repeats(nodes, edges)
    assert (folded.nodes, folded.edges, folded.blocks, folded.renamed) == (nodes, edges, [], {})
