"""The PyTorch mapper: validated graph → :class:`MappedModel` → render context.

Importing this package registers one converter per op (one module per op family, named
like :mod:`core.ops`). :func:`map_model` decides the generated names — layer attributes
from the node ids (sanitised, never colliding with ``nn.Module``'s own attributes) and
tensor names that follow chains (a straight chain keeps reusing one name, as hand-written
code does: ``x = self.conv1(x)``) — and asks each converter for its layer.
"""

from __future__ import annotations

import builtins
from typing import Any

from core.mapping import naming
from core.mapping.base import MappedModel, converters
from core.mapping.block_classes import Hooks, map_graph, rebase_weights
from core.mapping.torch import (  # noqa: F401  (imported for their registrations)
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

# Attributes every nn.Module already has (torch 2.13): a layer must not take one of these names.
MODULE_ATTRIBUTES = frozenset("""
T_destination add_module apply bfloat16 buffers call_super_init children compile cpu cuda double
dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter get_submodule half ipu
load_state_dict modules mtia named_buffers named_children named_modules named_parameters parameters
register_backward_hook register_buffer register_forward_hook register_forward_pre_hook
register_full_backward_hook register_full_backward_pre_hook register_load_state_dict_post_hook
register_load_state_dict_pre_hook register_module register_parameter register_state_dict_post_hook
register_state_dict_pre_hook requires_grad_ set_extra_state set_submodule share_memory state_dict to
to_empty train training type xpu zero_grad
""".split())

# Names the generated model.py defines or imports: no layer or tensor may shadow them.
MODULE_NAMES = frozenset({"torch", "nn", "F", "np", "math", "PositionalEmbedding", "ClassToken", "last_state",
                          "TiedLinear", "gelu_tanh", "SelfAttention", "TransformerEncoderBlock",
                          "reset_parameters", "uniform_fan_in", "build_model", "load_canonical_weights",
                          "canonical_weights", "forward_numpy", "INPUT_SHAPE", "INPUT_DTYPE", "CANONICAL", CLASS_NAME})
TENSOR_RESERVED = MODULE_NAMES | {"self", "x"} | set(dir(builtins))


def layer_names(analysis: Analysis) -> dict[str, str]:
    """node id → attribute name of its layer (``self.<name>``)."""
    return naming.layer_names(analysis, MODULE_ATTRIBUTES | MODULE_NAMES)


def tensor_names(analysis: Analysis) -> dict[str, str]:
    """node id → name of the tensor it produces in ``forward`` (chains reuse one name)."""
    return naming.chain_tensor_names(analysis, TENSOR_RESERVED)


def map_model(analysis: Analysis) -> MappedModel:
    """One MappedLayer per node, in graph (topological) order."""
    reg = converters("torch")
    hooks = Hooks("torch", reg, MODULE_ATTRIBUTES | MODULE_NAMES, TENSOR_RESERVED,
                  use_forward=lambda var, ins: f"self.{var}({', '.join(ins)})", rebase=rebase_weights,
                  module_names=MODULE_NAMES)
    layers_by_id, classes = map_graph(analysis, hooks, layer_names(analysis), tensor_names(analysis))
    if analysis.input_id is None or analysis.output_id is None:
        raise ValueError("the graph has no Input or Output node; validate the spec before mapping it")
    inp, outp = analysis.nodes[analysis.input_id], analysis.nodes[analysis.output_id]
    helpers = sorted({h for layer in layers_by_id.values() for h in layer.extra.get("helpers", ())})
    return MappedModel(
        framework="torch",
        class_name=CLASS_NAME,
        layers=tuple(layers_by_id.values()),
        input_name="x",
        output_name=layers_by_id[outp.id].forward,
        input_layout=naming.logical_layout(inp.output.shape, inp.output.dtype, analysis, inp.id),
        output_layout=naming.logical_layout(outp.output.shape, outp.output.dtype, analysis, outp.id),
        imports=("numpy", "torch"),
        extra={"helpers": helpers, "classes": classes},
    )


def render_context(spec: PipelineSpec, analysis: Analysis) -> dict[str, Any]:
    """Everything templates/torch/*.j2 (and templates/common/data.py.j2) refer to."""
    from core.mapping.data import data_context
    from core.mapping.torch._context import model_context

    context = model_context(spec, analysis, map_model(analysis))
    context.update(data_context(spec, analysis))
    return context
