"""LSTM and GRU, batch-first. Without ``return_sequences`` the node yields the last state:
the forward direction's last step, joined with the backward direction's first step when
bidirectional (that is where the backward pass ends)."""

from __future__ import annotations

from typing import Any

from core.mapping.base import ConvertContext, MappedLayer, call, literal
from core.mapping.torch._common import layer, module, register


@register("LSTM", "GRU")
def recurrent(ctx: ConvertContext) -> MappedLayer:
    p = ctx.params
    kwargs: dict[str, Any] = {"batch_first": True}
    if p["num_layers"] != 1:
        kwargs["num_layers"] = p["num_layers"]
    if p["bidirectional"]:
        kwargs["bidirectional"] = True
    ctor = call(f"nn.{ctx.node.op}", literal(ctx.in_shapes[0][1]), literal(p["hidden_size"]), **kwargs)
    seq = f"{call(module(ctx), ctx.in_names[0])}[0]"
    if p["return_sequences"]:
        return layer(ctx, seq, ctor)
    if not p["bidirectional"]:
        return layer(ctx, f"{seq}[:, -1]", ctor)
    return layer(ctx, call("last_state", seq, literal(p["hidden_size"])), ctor, helpers=("last_state",))
