"""Lmod environment modules: list them, load them for a probe, and load them in ``job.sbatch``.

An environment may be one module (``module``) or every module of a tree (``modules``, a glob, with
``modulepath``; see :mod:`settings.environments`). Listing uses Lmod's ``spider -o spider-json
<MODULEPATH>``, which prints every module file of those directories as JSON (name → file →
``fullName``, ``Version``, ``Description``, ``hidden``). Loading is ``module use`` + ``module load``
in bash, from Lmod's own init file when the shell has no ``module`` function yet; a module that
does not load fails the command (and the job) with Lmod's message.

Lmod is found through ``$LMOD_DIR`` (set by Lmod's init) or ``$LMOD_PKG``, else Debian's
``/usr/share/lmod/lmod``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from schedulers.base import SchedulerError
from settings import Environment

DEFAULT_LMOD_PKG = "/usr/share/lmod/lmod"
TIMEOUT_S = 60.0

# bash -c SCRIPT flowtrain-module MODULEPATH MODULE CMD ARGS...: load the module, then exec CMD.
_LOAD_AND_EXEC = (
    'set -eu; mp=$1; mod=$2; shift 2; '
    'if ! command -v module >/dev/null 2>&1; then source "${LMOD_PKG:-' + DEFAULT_LMOD_PKG + '}/init/bash"; fi; '
    'IFS=:; for d in $mp; do module use --append "$d"; done; unset IFS; '
    'module load "$mod"; exec "$@"'
)


@dataclass(frozen=True)
class ModuleInfo:
    """One module file as ``spider`` lists it."""

    full_name: str  # torch/2.13.0
    name: str  # torch
    version: str  # 2.13.0
    description: str
    path: str  # the module file
    modulepath: str  # the directory it was found under


def lmod_pkg() -> Path:
    """Lmod's installation directory (holding ``libexec/`` and ``init/``)."""
    if os.environ.get("LMOD_DIR"):
        return Path(os.environ["LMOD_DIR"]).parent
    return Path(os.environ.get("LMOD_PKG") or DEFAULT_LMOD_PKG)


def modules_from_spider_json(doc: object) -> list[ModuleInfo]:
    """``spider -o spider-json`` output → modules (hidden ones left out), sorted by full name."""
    if not isinstance(doc, dict):
        raise ValueError(f"spider -o spider-json printed {type(doc).__name__}, not an object")
    out = []
    for name, files in doc.items():
        for path, info in (files or {}).items():
            if info.get("hidden"):
                continue
            full = str(info.get("fullName") or name)
            out.append(ModuleInfo(full_name=full, name=full.rsplit("/", 1)[0], version=str(info.get("Version") or ""),
                                  description=str(info.get("Description") or ""), path=path,
                                  modulepath=str(info.get("mpath") or "")))
    return sorted(out, key=lambda m: m.full_name)


def spider(modulepath: Sequence[str], timeout_s: float = TIMEOUT_S) -> list[ModuleInfo]:
    """Every module under ``modulepath`` (Lmod's ``spider -o spider-json``)."""
    exe = lmod_pkg() / "libexec" / "spider"
    if not exe.is_file():
        raise SchedulerError(f"Lmod's spider is not at {exe}; install Lmod (Debian: apt-get install lmod) or set "
                             "LMOD_DIR to its libexec directory")
    try:
        proc = subprocess.run([str(exe), "-o", "spider-json", ":".join(modulepath)], capture_output=True, text=True,
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise SchedulerError(f"Lmod's spider did not list {':'.join(modulepath)} within {timeout_s:g} s") from exc
    try:
        return modules_from_spider_json(json.loads(proc.stdout or "{}"))
    except (json.JSONDecodeError, ValueError) as exc:
        said = (proc.stderr.strip() or proc.stdout.strip())[-500:]
        raise SchedulerError(f"Lmod's spider -o spider-json {':'.join(modulepath)} printed no module list ({exc}): {said}") \
            from exc


def expand(environments: Iterable[Environment]) -> list[Environment]:
    """Each ``modules`` environment replaced by one environment per module it matches (named
    ``NAME:MODULE``); the others unchanged. A tree with no matching module is an error naming it."""
    out: list[Environment] = []
    for env in environments:
        if env.modules is None:
            out.append(env)
            continue
        found = [m for m in spider(env.modulepath) if fnmatch.fnmatchcase(m.full_name, env.modules)]
        if not found:
            raise SchedulerError(f"environment {env.name}: no module matching {env.modules!r} under "
                                 f"{':'.join(env.modulepath)} (Lmod's spider lists none)")
        out += [replace(env, name=f"{env.name}:{m.full_name}", module=m.full_name, modules=None) for m in found]
    return out


def load_and_exec(env: Environment, argv: Sequence[str]) -> list[str]:
    """``argv`` run after loading ``env``'s module (unchanged for an environment without one); every
    value reaches bash as a positional parameter, never as code."""
    if env.module is None:
        return list(argv)
    return ["bash", "-c", _LOAD_AND_EXEC, "flowtrain-module", ":".join(env.modulepath), env.module, *argv]


def sbatch_lines(module: str, modulepath: Sequence[str]) -> list[str]:
    """The lines of ``job.sbatch`` that load ``module`` (already shell-quoted)."""
    lines = [f'command -v module >/dev/null 2>&1 || source "${{LMOD_PKG:-{DEFAULT_LMOD_PKG}}}/init/bash"']
    lines += [f"module use --append {shlex.quote(d)}" for d in modulepath]
    lines.append(f"module load {shlex.quote(module)}")
    return lines
