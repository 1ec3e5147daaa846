"""LSTM and GRU, batch-first sequences (T, F).

Keras's LSTM has torch's gate order (i, f, g, o) and one bias, the sum of torch's b_ih and
b_hh (read back as b_ih = bias, b_hh = 0: the same function). Keras's GRU with
``reset_after=True`` is torch's formulation but orders the gates z, r, h where torch has
r, z, n, and keeps both biases as rows of a (2, 3H) array. Stacked layers are a
``keras.Sequential`` of single layers; bidirectional ones are ``layers.Bidirectional``,
whose last state (forward's last step, backward's first) is what torch's mapper returns.
All weights and biases start U(±1/√hidden) as in torch (``unit_forget_bias=False``).
"""

from __future__ import annotations

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.keras._common import (
    CANON,
    KerasWeight,
    arr,
    construct,
    initializer,
    key,
    layer,
    module,
    register,
    take,
)


def _cell_weights(ctx: ConvertContext, path: str, suffix: str, gru: bool) -> list[KerasWeight]:
    names = [f"{n}{suffix}" for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    w_ih, w_hh, b_ih, b_hh = (arr(ctx, n) for n in names)
    k_ih, k_hh, kb_ih, kb_hh = (key(ctx, n) for n in names)
    if gru:
        return [
            KerasWeight(f"{path}.kernel", f"gru_gates({w_ih}).T", ((k_ih, "gru_gates({v}.T)"),), "gru_gates_transpose"),
            KerasWeight(f"{path}.recurrent_kernel", f"gru_gates({w_hh}).T", ((k_hh, "gru_gates({v}.T)"),),
                        "gru_gates_transpose"),
            KerasWeight(f"{path}.bias", f"np.stack([gru_gates({b_ih}), gru_gates({b_hh})])",
                        ((kb_ih, "gru_gates({v}[0])"), (kb_hh, "gru_gates({v}[1])")), "gru_gates_stack"),
        ]
    return [
        KerasWeight(f"{path}.kernel", f"{w_ih}.T", ((k_ih, "{v}.T"),), "transpose"),
        KerasWeight(f"{path}.recurrent_kernel", f"{w_hh}.T", ((k_hh, "{v}.T"),), "transpose"),
        KerasWeight(f"{path}.bias", f"{b_ih} + {b_hh}", ((kb_ih, "{v}"), (kb_hh, "np.zeros_like({v})")), "sum"),
    ]


@register("LSTM", "GRU")
def recurrent(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    gru = ctx.node.op == "GRU"
    h, layers_n, bidir = p["hidden_size"], p["num_layers"], p["bidirectional"]
    init = initializer(ctx, "weight_ih_l0")  # every weight and bias of the op: U(±1/√hidden)
    cls = "layers.GRU" if gru else "layers.LSTM"
    ctors = []
    weights: list[KerasWeight] = []
    for k in range(layers_n):
        sequences = p["return_sequences"] or k < layers_n - 1
        options = {"return_sequences": True} if sequences else {}
        options.update({"reset_after": True} if gru else {"unit_forget_bias": False})
        rnn = construct(cls, [literal(h)], options,
                        {"kernel_initializer": init, "recurrent_initializer": init, "bias_initializer": init})
        ctors.append(call("layers.Bidirectional", rnn) if bidir else rnn)
        base = f"layers[{k}]." if layers_n > 1 else ""
        if bidir:
            weights += _cell_weights(ctx, f"{base}forward_layer.cell", f"_l{k}", gru)
            weights += _cell_weights(ctx, f"{base}backward_layer.cell", f"_l{k}_reverse", gru)
        else:
            weights += _cell_weights(ctx, f"{base}cell", f"_l{k}", gru)
    ctor = ctors[0] if layers_n == 1 else call("keras.Sequential", "[" + ", ".join(ctors) + "]")
    helpers = ["gru_gates"] if gru else []
    return layer(ctx, call(module(ctx), take(ctx, 0, CANON)), ctor, layout=CANON, weights=weights, helpers=helpers,
                 training=False)
