"""A small builder for writing pipelines in Python (the model zoo, tests, benchmarks)."""

from __future__ import annotations

from typing import Any

from core.spec import PipelineSpec


class GraphBuilder:
    """Appends nodes with generated ids (``conv1``, ``conv2`` …) and the edges between them."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.blocks: list[dict[str, Any]] = []
        self._counts: dict[str, int] = {}

    def add(self, op: str, *inputs: str, id: str | None = None, **params: Any) -> str:
        if id is None:
            stem = op.lower()
            self._counts[stem] = self._counts.get(stem, 0) + 1
            id = f"{stem}{self._counts[stem]}"
        self.nodes.append({"id": id, "op": op, "params": params})
        ported = len(inputs) > 1
        for port, src in enumerate(inputs):
            edge: dict[str, Any] = {"source": src, "target": id}
            if ported:
                edge["port"] = port
            self.edges.append(edge)
        return id

    def chain(self, x: str, *layers: tuple[str, dict[str, Any]]) -> str:
        for op, params in layers:
            x = self.add(op, x, **params)
        return x

    def block(self, name: str, description: str, params: dict[str, Any], body: GraphBuilder, output: str,
              inputs: tuple[str, ...] = ("x",)) -> str:
        """Define a block (once) from the nodes and edges of ``body``, whose edges may start at
        ``inputs``; ``params`` maps each block parameter to its default (int, float, bool or str)."""
        if not any(b["name"] == name for b in self.blocks):
            kinds = {bool: "bool", int: "int", float: "float", str: "str"}
            self.blocks.append({
                "name": name, "description": description, "inputs": list(inputs),
                "params": [{"name": k, "type": kinds[type(v)], "default": v} for k, v in params.items()],
                "nodes": body.nodes, "edges": body.edges, "output": output,
            })
        return name

    def model(self) -> dict[str, Any]:
        model: dict[str, Any] = {"nodes": self.nodes, "edges": self.edges}
        if self.blocks:
            model["blocks"] = self.blocks
        return model

    def spec(self, name: str, description: str, data: dict[str, Any], training: dict[str, Any]) -> PipelineSpec:
        return PipelineSpec.model_validate(
            {"name": name, "description": description, "data": data, "model": self.model(), "training": training}
        )
