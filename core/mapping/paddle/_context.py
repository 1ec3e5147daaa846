"""What templates/paddle/model.py.j2 and the paddle partials need beyond the mapped layers: shapes, which
helpers the model uses, and the statements of ``reset_parameters`` (from the ops' declared initialisers).
The training section is rendered from the shared runtime context (``core.codegen.runtime_context``).

Every value is typed and reaches the code through the ``py`` filter; nothing the user types is
spliced into code.
"""

from __future__ import annotations

import re
from typing import Any

from core.mapping.base import MappedModel, literal
from core.mapping.init import init_calls
from core.spec import PipelineSpec
from core.validate import Analysis


def init_lines(model: MappedModel, analysis: Analysis) -> list[str]:
    """The statements of ``reset_parameters``: each op's declared initialisers (see core/mapping/init.py).
    A uniform initialiser takes the declared fan-in, so paddle's (in, out) Linear weight needs no rule of its own."""
    lines = []
    for c in init_calls(model, analysis):
        w, target = c.weight, f"model.{c.target}"
        lines.append({"uniform": f"uniform_fan_in({target}, {literal(w.fan_in)})",
                      "normal": f"nn.initializer.Normal(0.0, {literal(w.std)})({target})",
                      "ones": f"nn.initializer.Constant(1.0)({target})",
                      "zeros": f"nn.initializer.Constant(0.0)({target})"}[w.init])
    return lines


def model_context(spec: PipelineSpec, analysis: Analysis, model: MappedModel) -> dict[str, Any]:
    if analysis.input_id is None or analysis.output_id is None:
        raise ValueError("the graph has no Input or Output node; validate the spec before rendering it")
    inp = analysis.nodes[analysis.input_id].output
    out = analysis.nodes[analysis.output_id].output
    ops = {n.op for n in analysis.nodes.values()}
    layers = [*model.layers, *(layer for cls in model.extra.get("classes", ()) for layer in cls.layers)]
    code = "\n".join(filter(None, [layer.forward for layer in layers] + [layer.ctor or "" for layer in layers]))
    helpers = set(model.extra.get("helpers", ()))
    init = init_lines(model, analysis)
    return {
        "model": model,
        "input_shape": tuple(inp.shape),
        "input_dtype": inp.dtype,
        "output_shape": tuple(out.shape),
        "output_numel": out.numel,
        "uses_functional": bool(re.search(r"\bF\.", code)) or any(h.startswith("UnbiasedBatchNorm") for h in helpers),
        "init": init,
        "init_uniform": any(line.startswith("uniform_fan_in(") for line in init),
        "has_batch_norm": bool(ops & {"BatchNorm1d", "BatchNorm2d"}),
    }
