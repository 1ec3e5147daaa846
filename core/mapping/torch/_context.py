"""The training section of a spec → the values templates/torch/train.py.j2 renders.

Every value is typed (numbers, booleans, short fixed strings from the spec's Literal
choices) and reaches the code through the ``py`` filter; nothing the user types is
spliced into code.
"""

from __future__ import annotations

import re
from typing import Any

from core.mapping.base import MappedModel
from core.spec import PipelineSpec
from core.validate import Analysis

_LINEAR_LIKE = {"Linear": "nn.Linear", "Conv1d": "nn.Conv1d", "Conv2d": "nn.Conv2d",
                "ConvTranspose2d": "nn.ConvTranspose2d"}
_NORMS = {"BatchNorm1d": "nn.BatchNorm1d", "BatchNorm2d": "nn.BatchNorm2d", "LayerNorm": "nn.LayerNorm"}


def _classes(names: list[str]) -> str | None:
    """``nn.X`` or ``(nn.X, nn.Y)`` for an isinstance check; None when empty."""
    if not names:
        return None
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def init_groups(analysis: Analysis) -> dict[str, str | bool | None]:
    """Which initialiser branches model.py needs (only the layer types the network has)."""
    ops = {n.op for n in analysis.nodes.values()}
    attention = bool(ops & {"MultiheadAttention", "TransformerEncoderLayer"})
    linear = [cls for op, cls in _LINEAR_LIKE.items() if op in ops]
    if attention and "nn.Linear" not in linear:
        linear.insert(0, "nn.Linear")  # out_proj and the feed-forward layers are nn.Linear
    norms = [cls for op, cls in _NORMS.items() if op in ops]
    if "TransformerEncoderLayer" in ops and "nn.LayerNorm" not in norms:
        norms.append("nn.LayerNorm")
    recurrent = [f"nn.{op}" for op in ("LSTM", "GRU") if op in ops]
    return {
        "linear": _classes(linear),
        "attention": attention,
        "norm": _classes(norms),
        "embedding": "Embedding" in ops,
        "positional": "PositionalEmbedding" in ops,
        "recurrent": _classes(recurrent),
    }


def training_context(spec: PipelineSpec, analysis: Analysis, model: MappedModel) -> dict[str, Any]:
    t = spec.training
    if analysis.input_id is None or analysis.output_id is None:
        raise ValueError("the graph has no Input or Output node; validate the spec before rendering it")
    inp = analysis.nodes[analysis.input_id].output
    out = analysis.nodes[analysis.output_id].output
    ops = {n.op for n in analysis.nodes.values()}
    code = "\n".join(filter(None, [layer.forward for layer in model.layers] +
                            [layer.ctor or "" for layer in model.layers]))
    opt = t.optimizer
    sched = t.schedule
    return {
        "model": model,
        "input_shape": tuple(inp.shape),
        "input_dtype": inp.dtype,
        "output_shape": tuple(out.shape),
        "output_numel": out.numel,
        "uses_functional": bool(re.search(r"\bF\.", code)),
        "init": init_groups(analysis),
        "has_conv2d": bool(ops & {"Conv2d", "ConvTranspose2d"}),
        "has_batch_norm": bool(ops & {"BatchNorm1d", "BatchNorm2d"}),
        "train": {
            "epochs": t.epochs,
            "samples_per_epoch": t.samples_per_epoch,
            "loss": t.loss,
            "label_smoothing": float(t.label_smoothing),
            "precision": t.precision,
            "clip": None if t.gradient_clip_norm is None else float(t.gradient_clip_norm),
            "log_every": t.log_every_steps,
            "optimizer": {"name": opt.name, "lr": float(opt.lr), "momentum": float(opt.momentum),
                          "nesterov": bool(opt.nesterov and opt.momentum > 0),
                          "weight_decay": float(opt.weight_decay),
                          "betas": (float(opt.betas[0]), float(opt.betas[1])), "eps": float(opt.eps)},
            "schedule": {"name": sched.name, "step_size": sched.step_size, "gamma": float(sched.gamma),
                         "warmup_epochs": sched.warmup_epochs, "min_lr": float(sched.min_lr),
                         "patience": sched.patience, "factor": float(sched.factor)},
            "early_stopping": {"patience": t.early_stopping.patience, "monitor": t.early_stopping.monitor,
                               "min_delta": float(t.early_stopping.min_delta)},
            "checkpoint": {"every_steps": t.checkpoint.every_steps, "every_epoch": t.checkpoint.every_epoch,
                           "keep": t.checkpoint.keep},
            "performance": {"compile": t.performance.compile, "channels_last": t.performance.channels_last,
                            "device_data": t.performance.device_data},
        },
        "augmentation": [aug.model_dump() for aug in spec.data.augmentation],
    }
