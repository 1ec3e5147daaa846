"""Code generation: a validated spec + a framework → the files of a standalone training program.

``generate`` renders every top-level template in ``templates/<framework>/`` (partials start
with ``_``) and ``templates/common/`` through Jinja2 with ``StrictUndefined``: a template
that refers to something the mapper did not provide fails at generation time, not in
the researcher's job. Values reach the code only through the ``py`` filter
(:func:`core.mapping.base.literal`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
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


def environment(framework: str) -> jinja2.Environment:
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
    env = environment(framework)
    files: dict[str, str] = {}
    for name in _top_level_templates(framework):
        files[name.removesuffix(".j2")] = env.get_template(name).render(**context)
    files["spec.json"] = spec.to_json() + "\n"
    files["manifest.json"] = _manifest(spec, framework, files, context)
    return Program(framework, files)


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
        "framework_requirement": context.get("framework_requirement", framework),
        "entry_point": "train.py",
        "files": {name: hashlib.sha256(content.encode()).hexdigest() for name, content in sorted(files.items())},
    }
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"
