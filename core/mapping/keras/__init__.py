"""The Keras (TensorFlow backend) mapper: validated graph → :class:`MappedModel` → render context.

Importing this package registers one converter per op (one module per op family, named
like :mod:`core.ops`). :func:`map_model` decides the generated names — layer attributes
from the node ids (sanitised, never colliding with ``keras.Model``'s own attributes) and
tensor names that follow chains (``x = self.conv1(x)``) — and asks each converter for its
layer. The converters own the NCHW ↔ NHWC translation (see :mod:`core.mapping.keras._common`).
"""

from __future__ import annotations

import builtins
import re
from typing import Any

from core.mapping import naming
from core.mapping.base import MappedModel, Unsupported, converters
from core.mapping.block_classes import Hooks, map_graph, rebase_lines
from core.mapping.keras import (  # noqa: F401  (imported for their registrations)
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
from core.mapping.keras._common import CL, keras_shape, layout_of
from core.spec import PipelineSpec
from core.validate import Analysis

CLASS_NAME = "FlowTrainModel"

# Public attributes of keras.Model (Keras 3.15, TensorFlow backend): no layer may take one of these names.
MODEL_ATTRIBUTES = frozenset("""
activity_regularizer add_loss add_metric add_variable add_weight autocast build build_from_config built call
call_signature_parameters compile compile_from_config compiled compiled_loss compiled_metrics compute_dtype
compute_loss compute_mask compute_metrics compute_output_shape compute_output_spec count_params
distribute_reduction_method distribute_strategy dtype dtype_policy evaluate export fit from_config
get_build_config get_compile_config get_config get_layer get_metrics_result get_quantization_layer_structure
get_state_tree get_weights input input_dtype input_spec jit_compile layers load_own_variables load_weights
loss losses make_predict_function make_test_function make_train_function metrics metrics_names
metrics_variables name non_trainable_variables non_trainable_weights output path predict predict_function
predict_on_batch predict_step quantization_mode quantize quantized_build quantized_call rematerialized_call
reset_metrics run_eagerly save save_own_variables save_weights set_state_tree set_weights stateless_call
stateless_compute_loss steps_per_execution summary supports_jit supports_masking symbolic_call test_function
test_on_batch test_step to_json train_function train_on_batch train_step trainable trainable_variables
trainable_weights unrolled_steps_per_execution variable_dtype variables weights
submodules name_scope with_name_scope optimizer inputs outputs updates training
""".split())

# Names the generated model.py defines or imports: no layer or tensor may shadow them.
MODULE_NAMES = frozenset({
    "keras", "layers", "ops", "np", "math", "annotations", CLASS_NAME, "build_model", "load_canonical_weights",
    "canonical_weights", "forward_numpy", "to_keras_layout", "from_keras_layout", "INPUT_SHAPE", "INPUT_DTYPE",
    "KERAS_INPUT_SHAPE", "OUTPUT_SHAPE", "torch_uniform", "transpose", "oihw_to_hwio", "hwio_to_oihw", "oil_to_lio",
    "depthwise_kernel_from_torch2d", "depthwise_kernel_to_torch2d", "depthwise_kernel_from_torch1d",
    "depthwise_kernel_to_torch1d", "dense_kernel_from_channels_first", "dense_kernel_to_channels_first",
    "channels_first_flat", "gru_gates", "rescale_border", "adaptive_avg_pool2d", "adaptive_pool_matrix", "bilinear_upsample2d", "interpolation_matrix", "local_response_norm",
    "BatchNorm", "PositionalEmbedding", "ClassToken", "TiedDense", "SelfAttention", "TransformerEncoderBlock",
})
TENSOR_RESERVED = MODULE_NAMES | {"self", "x", "training", "a", "v", "out", "model", "arrays"} | set(dir(builtins))


def layer_names(analysis: Analysis) -> dict[str, str]:
    """node id → attribute name of its layer (``self.<name>``)."""
    return naming.layer_names(analysis, MODEL_ATTRIBUTES | MODULE_NAMES)


def tensor_names(analysis: Analysis, layer_vars: dict[str, str]) -> dict[str, str]:
    """node id → name of the tensor it yields in ``call`` (chains reuse one name; a new one
    starts from the layer's attribute name)."""
    return naming.chain_tensor_names(analysis, TENSOR_RESERVED, start_from=layer_vars)


def map_model(analysis: Analysis) -> MappedModel:
    """One MappedLayer per node in graph order; raises :class:`Unsupported` for an op Keras has no converter for."""
    reg = converters("keras")
    attrs = layer_names(analysis)
    outs = tensor_names(analysis, attrs)
    hooks = Hooks("keras", reg, MODEL_ATTRIBUTES | MODULE_NAMES, TENSOR_RESERVED,
                  use_forward=lambda var, ins: f"self.{var}({', '.join(ins)}, training=training)",
                  rebase=rebase_lines, tensors_from_layers=True, module_names=MODULE_NAMES)
    mapped, classes = map_graph(analysis, hooks, attrs, outs)
    if analysis.input_id is None or analysis.output_id is None:
        raise Unsupported("the graph needs one Input and one Output node")
    first, last = mapped[analysis.input_id], mapped[analysis.output_id]
    helpers = sorted({h for layer in mapped.values() for h in layer.extra["helpers"]})
    in_shape = analysis.nodes[analysis.input_id].output.shape
    return MappedModel(
        framework="keras", class_name=CLASS_NAME, layers=tuple(mapped.values()), input_name="x",
        output_name=last.forward, input_layout=_layout_name(in_shape, layout_of(first)),
        output_layout=_layout_name(analysis.nodes[analysis.output_id].output.shape, "canon"),
        imports=("keras", "numpy"),
        extra={"helpers": helpers, "classes": classes, "input_channels_last": layout_of(first) == CL,
               "keras_input_shape": keras_shape(in_shape, layout_of(first))},
    )


def _layout_name(dims: tuple[int, ...], layout: str) -> str:
    cl = layout == CL
    return {3: "NHWC" if cl else "NCHW", 2: "NLC" if cl else "NCL", 1: "NF"}.get(len(dims), "N" + "D" * len(dims))


def render_context(spec: PipelineSpec, analysis: Analysis) -> dict[str, Any]:
    """Everything ``templates/keras/*.j2`` (and the shared data.py template) need."""
    from core.mapping.data import data_context  # the shared data layer (not needed to map a model)

    model = map_model(analysis)
    context: dict[str, Any] = data_context(spec, analysis)
    context.update({
        "model": model,
        "helpers": set(model.extra["helpers"]),
        "input_shape": tuple(analysis.nodes[analysis.input_id].output.shape),  # type: ignore[index]
        "input_dtype": str(analysis.nodes[analysis.input_id].output.dtype),  # type: ignore[index]
        "output_shape": tuple(analysis.nodes[analysis.output_id].output.shape),  # type: ignore[index]
        "output_numel": int(analysis.nodes[analysis.output_id].output.numel),  # type: ignore[index]
        "keras_input_shape": tuple(model.extra["keras_input_shape"]),
        "input_channels_last": bool(model.extra["input_channels_last"]),
        "keras_imports": keras_imports,
        # an LSTM's one bias stands for torch's two: the optimizer steps it twice as far (TorchAdam, TorchSGD)
        "summed_biases": any(node.op == "LSTM" for node in analysis.nodes.values()),
        # an Embedding's gradient comes as IndexedSlices (a slice per token): combine_gradients clips it dense
        "sliced_gradients": any(node.op == "Embedding" for node in analysis.nodes.values()),
    })
    return context


def keras_imports(code: str) -> list[str]:
    """Which of ``keras.layers``/``keras.ops`` rendered code uses as ``layers.X``/``ops.X`` (for its import line)."""
    return [name for name in ("layers", "ops") if re.search(rf"(?<![\w.]){name}\.[A-Za-z_]", code)]
