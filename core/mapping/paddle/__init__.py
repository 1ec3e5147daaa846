"""The PaddlePaddle mapper: validated graph → :class:`MappedModel` → render context.

Importing this package registers one converter per op (one module per op family, named
like :mod:`core.ops`). :func:`map_model` decides the generated names — layer attributes
from the node ids (sanitised, never colliding with ``paddle.nn.Layer``'s own attributes)
and tensor names that follow chains (a straight chain keeps reusing one name, as
hand-written code does: ``x = self.conv1(x)``) — and asks each converter for its layer.
Paddle runs channels-first like torch, so the layouts are the canonical ones.
"""

from __future__ import annotations

import builtins
from typing import Any

from core.mapping import naming
from core.mapping.base import ConvertContext, MappedModel, converters
from core.mapping.block_classes import Hooks, map_graph, rebase_weights
from core.mapping.paddle import (  # noqa: F401  (imported for their registrations)
    activation,
    attention,
    conv,
    dense,
    dropout,
    embedding,
    gates,
    io,
    local_norm,
    merge,
    norm,
    pool,
    recurrent,
    resize,
    shape,
    shuffle,
    tokens,
)
from core.spec import PipelineSpec
from core.validate import Analysis

CLASS_NAME = "FlowTrainModel"

# Public attributes every paddle.nn.Layer already has (paddle 3.3; tests/mapping checks the
# list against the installed paddle): a layer must not take one of these names.
LAYER_ATTRIBUTES = frozenset("""
add_module add_parameter add_sublayer apply astype backward bfloat16 buffers children clear_gradients cpu
create_parameter create_tensor create_variable cuda double eval extra_repr float float16 forward full
full_name get_buffer get_extra_state get_parameter get_sublayer get_submodule half load_dict load_state_dict
modules named_buffers named_children named_modules named_parameters named_sublayers parameters
register_buffer register_forward_hook register_forward_post_hook register_forward_pre_hook register_module
register_parameter register_state_dict_hook requires_grad_ set_dict set_state_dict set_sublayer set_submodule
sharded_state_dict state_dict sublayers to to_static_state_dict train training type xpu zero_grad
""".split())

# Names the generated model.py defines or imports: no layer or tensor may shadow them.
MODULE_NAMES = frozenset({
    "paddle", "nn", "F", "np", "math", "PositionalEmbedding", "ClassToken", "causal_mask", "TiedLinear", "gelu_tanh", "with_activation", "UnbiasedBatchNorm1D", "UnbiasedBatchNorm2D",
    "last_state", "reset_parameters", "uniform_fan_in", "build_model", "load_canonical_weights", "canonical_weights",
    "forward_numpy", "to_paddle", "from_paddle", "INPUT_SHAPE", "INPUT_DTYPE", "CANONICAL", CLASS_NAME,
})
TENSOR_RESERVED = MODULE_NAMES | {"self", "x"} | set(dir(builtins))


def layer_names(analysis: Analysis) -> dict[str, str]:
    """node id → attribute name of its layer (``self.<name>``)."""
    return naming.layer_names(analysis, LAYER_ATTRIBUTES | MODULE_NAMES)


def tensor_names(analysis: Analysis) -> dict[str, str]:
    """node id → name of the tensor it produces in ``forward`` (chains reuse one name)."""
    return naming.chain_tensor_names(analysis, TENSOR_RESERVED)


def map_model(analysis: Analysis) -> MappedModel:
    """One MappedLayer per node, in graph (topological) order."""
    reg = converters("paddle")
    if analysis.input_id is None or analysis.output_id is None:
        raise ValueError("the graph has no Input or Output node; validate the spec before mapping it")
    hooks = Hooks("paddle", reg, LAYER_ATTRIBUTES | MODULE_NAMES, TENSOR_RESERVED,
                  use_forward=lambda var, ins: f"self.{var}({', '.join(ins)})", rebase=rebase_weights,
                  module_names=MODULE_NAMES)
    layers_by_id, classes = map_graph(analysis, hooks, layer_names(analysis), tensor_names(analysis))
    inp, outp = analysis.nodes[analysis.input_id], analysis.nodes[analysis.output_id]
    helpers = sorted({h for layer in layers_by_id.values() for h in layer.extra.get("helpers", ())})
    return MappedModel(
        framework="paddle",
        class_name=CLASS_NAME,
        layers=tuple(layers_by_id.values()),
        input_name="x",
        output_name=layers_by_id[outp.id].forward,
        input_layout=naming.logical_layout(inp.output.shape, inp.output.dtype, analysis, inp.id),
        output_layout=naming.logical_layout(outp.output.shape, outp.output.dtype, analysis, outp.id),
        imports=("numpy", "paddle"),
        extra={"helpers": helpers, "classes": classes},
    )


def render_context(spec: PipelineSpec, analysis: Analysis) -> dict[str, Any]:
    """Everything templates/paddle/*.j2 (and templates/common/data.py.j2) refer to."""
    from core.mapping.data import data_context
    from core.mapping.paddle._context import model_context

    context = model_context(spec, analysis, map_model(analysis))
    context.update(data_context(spec, analysis))
    return context


__all__ = ["CLASS_NAME", "ConvertContext", "map_model", "render_context"]
