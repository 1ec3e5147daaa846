"""Execution environments: which Python interpreters run generated programs, and where.

An *environment* is a Python interpreter (a venv's ``bin/python``, a module-provided
interpreter, …) that has some of the frameworks installed. On a Slurm cluster an environment may
be bound to partitions (the interpreter exists only on those nodes); locally it runs on the
portal's own machine.

Configured by the file named in ``FLOWTRAIN_ENVIRONMENTS`` or by the settings file's
``environments_file`` (JSON, or TOML when it ends in ``.toml``)::

    {
      "scheduler": "slurm",                       # optional: default scheduler (local | slurm)
      "environments": [
        {"name": "torch-gpu", "python": "/opt/venvs/torch/bin/python", "partitions": ["gpu"]},
        {"name": "paddle", "python": "/opt/venvs/paddle/bin/python", "partitions": ["cpu"],
         "local": false, "probe": "srun"},
        {"name": "site", "python": "/usr/bin/python3",
         "frameworks": {"keras": {"version": "3.15", "device": "cpu"}}}
      ]
    }

Environments from Lmod: ``"module": "torch/2.13.0"`` (with ``"modulepath"``: the directories to
``module use``) is one module, loaded before the interpreter runs; ``"modules": "*"`` (a glob of
module names) with ``"modulepath"`` stands for every matching module found there, listed by
discovery (``spider``) — one environment each, named ``NAME:MODULE``::

    {"name": "gpu", "modulepath": ["/opt/modulefiles/gpu"], "modules": "*", "partitions": ["gpu"]}

A module environment's ``python`` defaults to ``python3`` (the module's, found on its PATH) and it
runs on Slurm only (``local`` must stay false: the local executor loads no modules).

``partitions`` empty (the default) means the interpreter exists on every partition. ``local``
(default true) says whether the local executor may use it. ``frameworks`` overrides discovery
for that environment: nothing is probed, the listed frameworks are taken as installed (a list
of names, or a mapping name → ``{"version", "device"}``). ``probe`` is ``local`` (run the
interpreter here, the default) or ``srun`` (a short Slurm job on the environment's first
partition, for interpreters that exist only on compute nodes).

Without a file there is one environment, ``default``: this process's interpreter, on the local
machine and on every partition. The file's ``scheduler`` is the last word on the default scheduler
(``FLOWTRAIN_SCHEDULER`` and the settings file come first: see :mod:`settings.config`).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import CommandError
from core.frameworks import FRAMEWORKS

ENV_VAR = "FLOWTRAIN_ENVIRONMENTS"
SCHEDULERS = ("local", "slurm")
PROBE_MODES = ("local", "srun")
_TOP_KEYS = {"scheduler", "environments"}


@dataclass(frozen=True)
class FrameworkOverride:
    """A framework declared installed by configuration instead of by a probe."""

    version: str | None = None
    device: str = "cpu"  # "cpu" or "cuda"


@dataclass(frozen=True)
class Environment:
    name: str
    python: str
    partitions: tuple[str, ...] = ()  # empty: every partition
    local: bool = True
    frameworks: Mapping[str, FrameworkOverride] | None = None  # None: probe
    probe: str = "local"
    module: str | None = None  # an Lmod module loaded before ``python`` runs
    modulepath: tuple[str, ...] = ()  # directories to ``module use`` first
    modules: str | None = None  # a glob of module names: discovery expands it (schedulers.modules)

    def serves_partition(self, partition: str) -> bool:
        return not self.partitions or partition in self.partitions

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "python": self.python,
            "partitions": list(self.partitions),
            "local": self.local,
            "frameworks": None
            if self.frameworks is None
            else {k: {"version": v.version, "device": v.device} for k, v in self.frameworks.items()},
            "probe": self.probe,
            "module": self.module,
            "module_name": self.module.rsplit("/", 1)[0] if self.module else None,
            "module_version": self.module.rsplit("/", 1)[1] if self.module and "/" in self.module else None,
            "modulepath": list(self.modulepath),
            "modules": self.modules,
        }


@dataclass(frozen=True)
class EnvironmentsFile:
    """What an environments file says: its environments and, optionally, a default scheduler."""

    environments: tuple[Environment, ...]
    scheduler: str | None = None
    source: str = "(built-in default)"


def default_environment() -> Environment:
    return Environment(name="default", python=sys.executable)


def _bad(source: str, where: str, received: Any, expected: str) -> CommandError:
    return CommandError(
        f"{source}: {where} is {received!r}; expected {expected}. Fix the environments file "
        f"(named by {ENV_VAR} or the settings file's environments_file)."
    )


def _frameworks(source: str, where: str, value: Any) -> dict[str, FrameworkOverride]:
    if isinstance(value, list):
        value = {name: {} for name in value}
    if not isinstance(value, dict):
        raise _bad(source, where, value, 'a list of framework names or {"torch": {"version": …}}')
    out: dict[str, FrameworkOverride] = {}
    for name, info in value.items():
        if name not in FRAMEWORKS:
            raise _bad(source, f"{where} key", name, f"one of {', '.join(FRAMEWORKS)}")
        info = info or {}
        if not isinstance(info, dict):
            raise _bad(source, f"{where}.{name}", info, 'an object like {"version": "2.3", "device": "cuda"}')
        device = info.get("device", "cpu")
        if device not in ("cpu", "cuda"):
            raise _bad(source, f"{where}.{name}.device", device, '"cpu" or "cuda"')
        version = info.get("version")
        out[name] = FrameworkOverride(version=None if version is None else str(version), device=device)
    return out


_MODULE_RE = re.compile(r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*")  # fullmatch: "$" would let a trailing newline in


def _module_keys(source: str, where: str, raw: Mapping[str, Any]) -> tuple[str | None, str | None, tuple[str, ...]]:
    """``module``, ``modules`` and ``modulepath`` of one entry, checked."""
    module, modules, path = raw.get("module"), raw.get("modules"), raw.get("modulepath", [])
    if module is not None and modules is not None:
        raise _bad(source, where, "both module and modules", "one of them: a module, or a glob of modules")
    if module is not None and not (isinstance(module, str) and _MODULE_RE.fullmatch(module)):
        raise _bad(source, f"{where}.module", module, 'a module name like "torch/2.13.0"')
    if modules is not None and not (isinstance(modules, str) and re.fullmatch(r"[A-Za-z0-9_.+*?/\[\]-]+", modules)):
        raise _bad(source, f"{where}.modules", modules, 'a glob of module names like "*" or "torch/*"')
    if isinstance(path, str):
        path = [p for p in path.split(":") if p]
    if not isinstance(path, list) or not all(isinstance(p, str) and p.startswith("/") for p in path):
        raise _bad(source, f"{where}.modulepath", path, "a list of absolute directories")
    if modules is not None and not path:
        raise _bad(source, f"{where}.modulepath", path, "the directories to list modules from (with modules)")
    return module, modules, tuple(path)


def parse_environments(doc: Any, source: str = "<environments>") -> EnvironmentsFile:
    """An already parsed JSON/TOML document; every mistake names the field."""
    if not isinstance(doc, dict):
        raise _bad(source, "the document", type(doc).__name__, 'an object with an "environments" list')
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise _bad(source, "top-level key(s)", sorted(unknown), "only scheduler and environments")
    scheduler = doc.get("scheduler")
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise _bad(source, "scheduler", scheduler, " or ".join(SCHEDULERS))
    raw_envs = doc.get("environments", [])
    if not isinstance(raw_envs, list):
        raise _bad(source, "environments", raw_envs, "a list of environment objects")
    envs: list[Environment] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_envs):
        where = f"environments[{i}]"
        if not isinstance(raw, dict):
            raise _bad(source, where, raw, 'an object like {"name": "torch", "python": "/path/bin/python"}')
        unknown = set(raw) - {"name", "python", "partitions", "local", "frameworks", "probe", "module", "modules",
                              "modulepath"}
        if unknown:
            raise _bad(source, f"{where} key(s)", sorted(unknown),
                       "only name, python, partitions, local, frameworks, probe, module, modules, modulepath")
        module, modules, modulepath = _module_keys(source, where, raw)
        name = raw.get("name") or f"env{i}"
        if not isinstance(name, str) or name in seen:
            raise _bad(source, f"{where}.name", name, "a unique string")
        seen.add(name)
        python = raw.get("python") or ("python3" if module or modules else sys.executable)
        if not isinstance(python, str):
            raise _bad(source, f"{where}.python", python, "the path of a Python interpreter")
        parts = raw.get("partitions", [])
        if isinstance(parts, str):
            parts = [p for p in parts.split(",") if p]
        if not isinstance(parts, list) or not all(isinstance(p, str) and p for p in parts):
            raise _bad(source, f"{where}.partitions", parts, "a list of partition names")
        local = raw.get("local", not (module or modules))
        if not isinstance(local, bool):
            raise _bad(source, f"{where}.local", local, "true or false")
        if local and (module or modules):
            raise _bad(source, f"{where}.local", local, "false for a module environment (the local executor "
                       "loads no modules)")
        probe = raw.get("probe", "local")
        if probe not in PROBE_MODES:
            raise _bad(source, f"{where}.probe", probe, " or ".join(PROBE_MODES))
        if probe == "srun" and not parts:
            raise _bad(source, f"{where}.partitions", parts, 'at least one partition when probe is "srun"')
        fws = raw.get("frameworks")
        envs.append(Environment(
            name=name,
            python=python,
            partitions=tuple(parts),
            local=local,
            frameworks=None if fws is None else _frameworks(source, f"{where}.frameworks", fws),
            probe=probe,
            module=module,
            modulepath=modulepath,
            modules=modules,
        ))
    if not envs:
        envs.append(default_environment())
    return EnvironmentsFile(environments=tuple(envs), scheduler=scheduler, source=source)


def load_environments(path: str | Path | None) -> EnvironmentsFile:
    """Read an environments file; ``None``: the built-in default (this interpreter, everywhere).

    Which file applies is decided by :func:`settings.load_settings` (``FLOWTRAIN_ENVIRONMENTS`` or
    the settings file's ``environments_file``).
    """
    if path is None:
        return EnvironmentsFile(environments=(default_environment(),))
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{p} (the environments file, from {ENV_VAR} or environments_file) cannot be read: "
                           f"{exc.strerror or exc}; point it at a JSON or TOML environments file") from None
    try:
        doc = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CommandError(f"{p}: not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {exc}") from None
    return parse_environments(doc, source=str(p))
