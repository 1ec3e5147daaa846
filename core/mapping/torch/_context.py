"""The training section of a spec → the values templates/torch/train.py.j2 renders, and the
statements of the model's ``reset_parameters`` (from the ops' declared initialisers).

Every value is typed (numbers, booleans, short fixed strings from the spec's Literal
choices) and reaches the code through the ``py`` filter; nothing the user types is
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
    """The statements of ``reset_parameters``: each op's declared initialisers (see core/mapping/init.py)."""
    lines = []
    for c in init_calls(model, analysis):
        w, target = c.weight, f"model.{c.target}"
        lines.append({"uniform": f"uniform_fan_in({target}, {literal(w.fan_in)})",
                      "normal": f"nn.init.normal_({target}, 0.0, {literal(w.std)})",
                      "ones": f"nn.init.ones_({target})",
                      "zeros": f"nn.init.zeros_({target})"}[w.init])
    return lines


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
    init = init_lines(model, analysis)
    return {
        "model": model,
        "input_shape": tuple(inp.shape),
        "input_dtype": inp.dtype,
        "output_shape": tuple(out.shape),
        "output_numel": out.numel,
        "uses_functional": bool(re.search(r"\bF\.", code)),
        "init": init,
        "init_uniform": any(line.startswith("uniform_fan_in(") for line in init),
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
