"""LSTM and GRU, batch-first (paddle's ``time_major=False`` default). Paddle's parameters
have torch's names, shapes and gate orders (``weight_ih_l0``, ``bias_hh_l1_reverse`` …), so
torch's state dict loads unchanged. Without ``return_sequences`` the node yields the last
state: the forward direction's last step, joined with the backward direction's first step
when bidirectional (that is where the backward pass ends)."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.paddle._common import layer, module, register


@register("LSTM", "GRU")
def recurrent(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {}
    if p["num_layers"] != 1:
        kwargs["num_layers"] = p["num_layers"]
    if p["bidirectional"]:
        kwargs["direction"] = "bidirect"
    ctor = call(f"nn.{ctx.node.op}", literal(ctx.in_shapes[0][1]), literal(p["hidden_size"]), **kwargs)
    seq = f"{call(module(ctx), ctx.in_names[0])}[0]"
    if p["return_sequences"]:
        return layer(ctx, seq, ctor)
    if not p["bidirectional"]:
        return layer(ctx, f"{seq}[:, -1]", ctor)
    return layer(ctx, call("last_state", seq, literal(p["hidden_size"])), ctor, helpers=("last_state",))
