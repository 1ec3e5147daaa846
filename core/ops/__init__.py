"""The op catalogue. Importing this package registers every op family."""

from core.ops import (  # noqa: F401  (imported for their registrations)
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
from core.ops.registry import REGISTRY, Op, Param, ShapeError, Tensor, Weight, register_op

__all__ = ["REGISTRY", "Op", "Param", "ShapeError", "Tensor", "Weight", "register_op"]
