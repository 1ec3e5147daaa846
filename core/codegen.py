"""Code generation: a validated spec + a framework → the files of a standalone training program.

``generate`` renders every top-level template in ``templates/<framework>/`` (partials start
with ``_``) and ``templates/common/`` through Jinja2 with ``StrictUndefined``: a template
that refers to something the mapper did not provide fails at generation time, not in
the researcher's job. Values reach the code only through the ``py`` filter
(:func:`core.mapping.base.literal`).

A framework's ``train.py.j2`` includes the shared partials of ``templates/common/`` (the
settings and learning-rate formulas: the same in every program) and its own partials for what
differs; its ``devices.py.j2`` holds the framework's processes, devices and data placement. What
does not depend on the framework at all is rendered once as modules of their own beside
``train.py``, which imports them: ``data.py`` (the data layer), ``runtime.py`` (the run's state and
records, checkpoint and output files, command line) and ``loop.py`` (the training loop). The
shared templates read the training settings from ``runtime`` (:func:`runtime_context`), which
is the same for every framework.

Every generated ``.py`` file is then formatted with ``ruff format`` (:func:`formatted`): the program is
what a researcher takes home and edits, and it should read like code written by hand, which a Jinja
template with optional lines and arguments cannot be made to emit byte for byte without making the
template unreadable instead. ruff is a pinned dependency in requirements.txt (a single static binary),
so wherever programs are generated — portal, CLI, tests — the same version formats them the same way.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from core.errors import CommandError, SpecError
from core.mapping.base import FRAMEWORKS, literal, unsupported_problems
from core.spec import PipelineSpec
from core.validate import Analysis, validate

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
FLOWTRAIN_VERSION = "0.1.0"

# The oldest framework release each generated program runs on (``manifest.json``), from the APIs
# the templates call; docs/generated-program.md lists the reasons.
FRAMEWORK_REQUIREMENTS = {
    "torch": "torch>=2.5",  # fused CPU optimizers (2.4), torch.onnx.export(dynamo=False) (2.5)
    "keras": "tensorflow>=2.16",  # the first TensorFlow with Keras 3 (keras.ops, optimizer.apply, model.export)
    "paddle": "paddlepaddle>=3.0",  # paddle.jit.save's PIR program (model.json), to_static(full_graph=True)
}


@dataclass(frozen=True)
class Program:
    framework: str
    files: dict[str, str]  # relative file name → content

    def write(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, content in self.files.items():
            path = out / name
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(content, encoding="utf-8")
            tmp.replace(path)
            written.append(path)
        return written


@functools.cache
def environment(framework: str) -> jinja2.Environment:
    """The framework's template environment, made once per process: an environment caches its compiled
    templates (it checks their files' times, so an edited template is read again), and compiling them
    was 90% of generating a program (0.37 s of 0.41 s, for every program the portal shows or a test makes)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(TEMPLATES / framework), str(TEMPLATES / "common")]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["py"] = literal
    return env


def mapper(framework: str) -> Any:
    if framework not in FRAMEWORKS:
        raise CommandError(f"unknown framework {framework!r}; choose one of: {', '.join(FRAMEWORKS)}")
    return importlib.import_module(f"core.mapping.{framework}")


def generate(spec: PipelineSpec, framework: str, analysis: Analysis | None = None) -> Program:
    """Render the program; raises SpecError for an invalid spec or ops the framework cannot express."""
    module = mapper(framework)
    analysis = analysis or validate(spec)
    problems = unsupported_problems(analysis, framework)
    if problems:
        raise SpecError(problems)
    context = module.render_context(spec, analysis)
    context.setdefault("spec", spec)
    context.setdefault("framework", framework)
    context.setdefault("flowtrain_version", FLOWTRAIN_VERSION)
    context.setdefault("spec_hash", spec.spec_hash())
    context.setdefault("runtime", runtime_context(spec))
    env = environment(framework)
    files: dict[str, str] = {}
    for name in _top_level_templates(framework):
        content = env.get_template(name).render(**context)
        if content.strip():  # a module only some programs need renders empty in the others (paddle's optim.py)
            files[name.removesuffix(".j2")] = content
    files = formatted(files)
    files["spec.json"] = spec.to_json() + "\n"
    files["manifest.json"] = _manifest(spec, framework, files, context)
    return Program(framework, files)


# The style of every generated .py file: ruff's defaults with the project's line length.
RUFF_FORMAT = ["format", "--isolated", "--no-cache", "--quiet", "--line-length", "120", "--target-version", "py311"]


def formatted(files: dict[str, str]) -> dict[str, str]:
    """The files with every ``.py`` one formatted by ``ruff format`` (one ruff process for all of them)."""
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError as exc:
        raise CommandError("ruff is not installed, and generated programs are formatted with it: "
                           "pip install -r requirements.txt") from exc
    python = sorted(name for name in files if name.endswith(".py"))
    with tempfile.TemporaryDirectory(prefix="flowtrain-format-") as folder:
        for name in python:
            (Path(folder) / name).write_text(files[name], encoding="utf-8")
        result = subprocess.run([find_ruff_bin(), *RUFF_FORMAT, *python], cwd=folder, capture_output=True, text=True)
        if result.returncode != 0:  # a template rendered code that does not parse: a FlowTrain bug
            raise RuntimeError(f"ruff format failed on the generated program: {result.stderr.strip()}")
        return {name: (Path(folder) / name).read_text(encoding="utf-8") if name in python else content
                for name, content in files.items()}


def runtime_context(spec: PipelineSpec) -> dict[str, Any]:
    """The training section as typed values, one shape for every framework's train.py (rendered only
    through the ``py`` filter)."""
    t = spec.training
    opt, sched, stop, ckpt, perf = t.optimizer, t.schedule, t.early_stopping, t.checkpoint, t.performance
    return {
        "epochs": int(t.epochs),
        "samples_per_epoch": None if t.samples_per_epoch is None else int(t.samples_per_epoch),
        "loss": str(t.loss),
        "label_smoothing": float(t.label_smoothing),
        "precision": str(t.precision),
        "clip": None if t.gradient_clip_norm is None else float(t.gradient_clip_norm),
        "log_every": int(t.log_every_steps),
        "optimizer": {"name": str(opt.name), "lr": float(opt.lr), "momentum": float(opt.momentum),
                      "nesterov": bool(opt.nesterov and opt.momentum > 0), "weight_decay": float(opt.weight_decay),
                      "betas": (float(opt.betas[0]), float(opt.betas[1])), "eps": float(opt.eps)},
        "schedule": {"name": str(sched.name), "step_size": int(sched.step_size), "gamma": float(sched.gamma),
                     "warmup_epochs": int(sched.warmup_epochs), "min_lr": float(sched.min_lr),
                     "patience": int(sched.patience), "factor": float(sched.factor)},
        "early_stopping": {"patience": None if stop.patience is None else int(stop.patience),
                           "monitor": str(stop.monitor), "min_delta": float(stop.min_delta)},
        "checkpoint": {"every_steps": None if ckpt.every_steps is None else int(ckpt.every_steps),
                       "every_epoch": bool(ckpt.every_epoch), "keep": int(ckpt.keep)},
        "performance": {"compile": str(perf.compile), "channels_last": str(perf.channels_last),
                        "device_data": str(perf.device_data), "xla": str(perf.xla)},
        "init_weights": None if t.init_weights is None else str(t.init_weights),
    }


def _top_level_templates(framework: str) -> list[str]:
    names: dict[str, None] = {}
    for folder in (TEMPLATES / framework, TEMPLATES / "common"):
        if folder.is_dir():
            for path in sorted(folder.glob("*.j2")):
                if not path.name.startswith("_"):
                    names[path.name] = None
    return list(names)


def _manifest(spec: PipelineSpec, framework: str, files: dict[str, str], context: dict[str, Any]) -> str:
    manifest = {
        "flowtrain_version": FLOWTRAIN_VERSION,
        "spec_name": spec.name,
        "spec_hash": spec.spec_hash(),
        "schema_version": spec.schema_version,
        "framework": framework,
        "framework_requirement": FRAMEWORK_REQUIREMENTS[framework],
        "entry_point": "train.py",
        "files": {name: hashlib.sha256(content.encode()).hexdigest() for name, content in sorted(files.items())},
    }
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"
