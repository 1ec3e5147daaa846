"""Discovery: which frameworks (name, version, CUDA or CPU build) each execution environment has.

Each framework is probed in its **own** subprocess of the environment's interpreter — importing
paddle after tensorflow in one process crashes, and the portal never imports a framework itself.
The three probes of an environment run in parallel, each with a timeout. Results are cached in
``$FLOWTRAIN_HOME/cache/discovery.json`` for ``ttl_s`` seconds (``FLOWTRAIN_DISCOVERY_TTL``,
default one hour): importing tensorflow takes seconds, the portal asks often.

An environment whose ``probe`` is ``srun`` is probed by a short Slurm job on its first partition
(``srun -p PART``), for interpreters that exist only on compute nodes. An environment from an Lmod
module is probed with its module loaded (:mod:`schedulers.modules`); one that stands for a tree of
modules (``modules``) is first expanded into one environment per module there.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.frameworks import FRAMEWORKS
from schedulers.base import SchedulerError
from schedulers.modules import expand, load_and_exec
from settings import Environment, flowtrain_home, load_settings

DEFAULT_TTL_S = 3600.0
DEFAULT_TIMEOUT_S = 120.0
MARKER = "FLOWTRAIN_PROBE "
CACHE_VERSION = 1

# Runs inside the environment's interpreter with the framework name as argv[1]. Only the line
# after MARKER is read: frameworks print banners and warnings of their own.
PROBE_SCRIPT = r"""
import json, sys, time
name = sys.argv[1]
t0 = time.perf_counter()
info = {"name": name, "python_version": sys.version.split()[0]}
# The distributions a framework is: only their absence means "not installed".
OWN = {"torch": {"torch"}, "keras": {"tensorflow", "keras"}, "paddle": {"paddle"}}
try:
    if name == "torch":
        import torch
        info["version"] = torch.__version__.split("+")[0]
        info["cuda_version"] = torch.version.cuda
        info["device"] = "cuda" if torch.version.cuda else "cpu"
        info["gpus_visible"] = torch.cuda.device_count() if torch.version.cuda else 0
    elif name == "keras":
        import tensorflow as tf
        import keras
        info["version"] = keras.__version__
        info["backend_version"] = tf.__version__
        build = tf.sysconfig.get_build_info()
        cuda = bool(build.get("is_cuda_build"))
        info["device"] = "cuda" if cuda else "cpu"
        info["cuda_version"] = build.get("cuda_version") if cuda else None
        info["gpus_visible"] = len(tf.config.list_physical_devices("GPU")) if cuda else 0
    elif name == "paddle":
        import paddle
        info["version"] = paddle.__version__
        cuda = paddle.is_compiled_with_cuda()
        info["device"] = "cuda" if cuda else "cpu"
        info["cuda_version"] = paddle.version.cuda() if cuda else None
        info["gpus_visible"] = paddle.device.cuda.device_count() if cuda else 0
    else:
        raise ValueError("unknown framework " + repr(name))
    info["installed"] = True
except ModuleNotFoundError as exc:
    info["installed"] = False
    missing = (exc.name or "").split(".")[0]
    if missing in OWN.get(name, ()):
        info["error"] = "ModuleNotFoundError: " + str(exc)
    else:  # the framework is there but one of its own dependencies is not: say which
        info["error"] = ("import failed: " + name + " is installed but needs the missing module "
                         + repr(exc.name) + " (ModuleNotFoundError: " + str(exc) + ")")
except Exception as exc:  # installed but broken (ImportError of a library, …): say so, do not crash
    info["installed"] = False
    info["error"] = "import failed: " + type(exc).__name__ + ": " + str(exc)
info["seconds"] = round(time.perf_counter() - t0, 3)
sys.stdout.flush()
sys.stdout.write("\n" + "FLOWTRAIN_PROBE " + json.dumps(info) + "\n")
"""

# Quiet the frameworks' own logging and keep keras on its TensorFlow backend.
PROBE_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow", "GLOG_minloglevel": "3"}


@dataclass(frozen=True)
class FrameworkInfo:
    name: str  # torch | keras | paddle
    installed: bool
    version: str | None = None
    device: str | None = None  # "cuda" (a CUDA build) or "cpu"
    cuda_version: str | None = None
    gpus_visible: int = 0  # GPUs the framework saw where the probe ran
    backend_version: str | None = None  # tensorflow's version, for keras
    error: str = ""
    source: str = "probe"  # probe | config | srun
    seconds: float = 0.0

    @property
    def build(self) -> str:
        if not self.installed:
            return "-"
        if self.device == "cuda":
            return f"CUDA {self.cuda_version}" if self.cuda_version else "CUDA"
        return "CPU"

    @property
    def cuda(self) -> bool:
        return self.installed and self.device == "cuda"

    def describe(self) -> str:
        if not self.installed:
            return f"{self.name}: not installed ({self.error or 'no module'})"
        extra = f", tensorflow {self.backend_version}" if self.backend_version else ""
        return f"{self.name} {self.version or '?'} ({self.build} build{extra})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "build": self.build}


@dataclass(frozen=True)
class EnvironmentReport:
    environment: Environment
    frameworks: dict[str, FrameworkInfo]
    python_version: str | None = None
    probed_at: float = 0.0
    from_cache: bool = False
    errors: tuple[str, ...] = field(default_factory=tuple)

    def installed(self) -> list[FrameworkInfo]:
        return [f for f in self.frameworks.values() if f.installed]

    def has(self, framework: str) -> bool:
        info = self.frameworks.get(framework)
        return bool(info and info.installed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment.to_dict(),
            "python_version": self.python_version,
            "probed_at": self.probed_at,
            "from_cache": self.from_cache,
            "errors": list(self.errors),
            "frameworks": {k: v.to_dict() for k, v in self.frameworks.items()},
        }


# --------------------------------------------------------------------------- probing


def _parse_probe(
    name: str, stdout: str, stderr: str, returncode: int, source: str
) -> tuple[FrameworkInfo, str | None]:
    """The probe's marker line → (what it found, the interpreter's Python version)."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        tail = (stderr.strip() or stdout.strip() or "(no output)")[-600:]
        return FrameworkInfo(name, installed=False, source=source,
                             error=f"probe exited with code {returncode} without a result: {tail}"), None
    doc = json.loads(line[len(MARKER):])
    keep = {k: doc[k] for k in ("version", "device", "cuda_version", "gpus_visible", "backend_version",
                                "error", "seconds") if doc.get(k) is not None}
    info = FrameworkInfo(name=name, installed=bool(doc.get("installed")), source=source, **keep)
    return info, doc.get("python_version")


def probe_framework(python: str, framework: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                    module_env: Environment | None = None) -> tuple[FrameworkInfo, str | None]:
    """Import ``framework`` in a fresh ``python`` process (with ``module_env``'s module loaded, when it
    has one); return what it found and the Python version.

    A missing interpreter or a timeout is reported in ``FrameworkInfo.error`` (``installed=False``);
    it is never raised: one broken environment must not hide the others.
    """
    env = {**os.environ, **PROBE_ENV}
    argv = [python, "-c", PROBE_SCRIPT, framework]
    try:
        proc = subprocess.run(load_and_exec(module_env, argv) if module_env else argv, capture_output=True,
                              text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        return FrameworkInfo(framework, installed=False, error=f"interpreter {python} not found; fix the "
                             "environment's python path (FLOWTRAIN_ENVIRONMENTS)"), None
    except PermissionError:
        return FrameworkInfo(framework, installed=False, error=f"interpreter {python} is not executable"), None
    except subprocess.TimeoutExpired:
        return FrameworkInfo(framework, installed=False,
                             error=f"probe timed out after {timeout_s:g} s importing {framework}"), None
    return _parse_probe(framework, proc.stdout, proc.stderr, proc.returncode, "probe")


def probe_framework_srun(env: Environment, framework: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                         commands: Any = None) -> tuple[FrameworkInfo, str | None]:
    """The same probe as a one-task Slurm job on the environment's first partition."""
    from schedulers.slurm.commands import SlurmCommands

    cmds = commands or SlurmCommands.from_env(timeout_s=timeout_s)
    partition = env.partitions[0]
    wait = max(int(timeout_s) - 5, 5)
    args = ["srun", f"--partition={partition}", "--nodes=1", "--ntasks=1", "--time=5",
            f"--immediate={wait}", "--job-name=flowtrain-probe", "--quiet",
            f"--export=ALL,{','.join(f'{k}={v}' for k, v in PROBE_ENV.items())}",
            *load_and_exec(env, [env.python, "-c", PROBE_SCRIPT, framework])]
    try:
        proc = cmds.run(args, timeout_s=timeout_s, clean_job_env=True)
    except SchedulerError as exc:
        return FrameworkInfo(framework, installed=False, source="srun", error=str(exc)), None
    return _parse_probe(framework, proc.stdout, proc.stderr, proc.returncode, "srun")


def _configured(env: Environment) -> EnvironmentReport:
    """The frameworks the configuration declares (``env.frameworks`` is set), no probe."""
    infos = {name: FrameworkInfo(name, installed=False, source="config", error="not listed in the configuration")
             for name in FRAMEWORKS}
    for name, o in (env.frameworks or {}).items():
        infos[name] = FrameworkInfo(name, installed=True, version=o.version, device=o.device, source="config")
    return EnvironmentReport(env, infos, probed_at=time.time())


def probe_environment(env: Environment, timeout_s: float = DEFAULT_TIMEOUT_S,
                      frameworks: Sequence[str] = FRAMEWORKS, commands: Any = None) -> EnvironmentReport:
    """Probe every framework of one environment, each in its own process, all at once."""
    if env.frameworks is not None:
        return _configured(env)

    def one(fw: str) -> tuple[FrameworkInfo, str | None]:
        if env.probe == "srun":
            return probe_framework_srun(env, fw, timeout_s, commands)
        return probe_framework(env.python, fw, timeout_s, module_env=env)

    with ThreadPoolExecutor(max_workers=len(frameworks)) as pool:
        results = list(pool.map(one, frameworks))
    infos = {fw: info for fw, (info, _) in zip(frameworks, results, strict=True)}
    py = next((v for _, v in results if v), None)
    errors = tuple(i.error for i in infos.values() if i.error and not _is_not_installed(i))
    return EnvironmentReport(env, infos, python_version=py, probed_at=time.time(), errors=errors)


def _is_not_installed(info: FrameworkInfo) -> bool:
    """The framework's own module missing is an answer; anything else (a missing dependency, a
    library that does not load, a timeout, a crash) is a failure that the report names."""
    return info.error.startswith("ModuleNotFoundError")


# --------------------------------------------------------------------------- cache


def default_cache_path() -> Path:
    return flowtrain_home() / "cache" / "discovery.json"


def _ttl() -> float:
    raw = os.environ.get("FLOWTRAIN_DISCOVERY_TTL")
    if not raw:
        return DEFAULT_TTL_S
    try:
        return float(raw)
    except ValueError:
        raise SchedulerError(f"FLOWTRAIN_DISCOVERY_TTL={raw!r} is not a number of seconds") from None


def _cache_key(env: Environment) -> str:
    python = env.python
    try:
        st = Path(python).resolve().stat()
        stamp = f"{st.st_mtime_ns}"
    except OSError:
        stamp = "missing"
    key = f"{env.probe}|{','.join(env.partitions) if env.probe == 'srun' else ''}|{python}|{stamp}"
    return f"{key}|module {env.module}|{':'.join(env.modulepath)}" if env.module else key


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError):
        return {}  # a damaged cache is only a cache: probe again and overwrite it
    if doc.get("version") != CACHE_VERSION:
        return {}
    return doc.get("entries", {})


def _save_cache(path: Path, entries: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1), encoding="utf-8")
    tmp.replace(path)


def _report_from_cache(env: Environment, entry: dict[str, Any]) -> EnvironmentReport:
    infos = {name: FrameworkInfo(**info) for name, info in entry["frameworks"].items()}
    return EnvironmentReport(env, infos, python_version=entry.get("python_version"),
                             probed_at=float(entry["probed_at"]), from_cache=True)


def discover(
    environments: Iterable[Environment] | None = None,
    *,
    refresh: bool = False,
    ttl_s: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cache_path: str | Path | None = None,
    commands: Any = None,
) -> list[EnvironmentReport]:
    """Frameworks of every environment (configured ones by default), from the cache when fresh.

    Probes that failed (timeout, crash, Slurm unreachable) are not cached, so the next call tries
    again; "not installed" answers are.
    """
    envs = expand(load_settings().environments if environments is None else environments)
    ttl = _ttl() if ttl_s is None else ttl_s
    path = Path(cache_path) if cache_path is not None else default_cache_path()
    cache = _load_cache(path)
    now = time.time()
    reports: dict[int, EnvironmentReport] = {}
    to_probe: list[tuple[int, Environment]] = []
    for i, env in enumerate(envs):
        if env.frameworks is not None:
            reports[i] = _configured(env)
            continue
        entry = cache.get(_cache_key(env))
        if not refresh and entry and now - float(entry.get("probed_at", 0)) < ttl:
            reports[i] = _report_from_cache(env, entry)
        else:
            to_probe.append((i, env))
    if to_probe:
        with ThreadPoolExecutor(max_workers=len(to_probe)) as pool:
            fresh = list(pool.map(lambda ie: probe_environment(ie[1], timeout_s, commands=commands), to_probe))
        cache = _load_cache(path)  # another process may have written meanwhile
        for (i, env), report in zip(to_probe, fresh, strict=True):
            reports[i] = report
            if not report.errors:
                cache[_cache_key(env)] = {
                    "probed_at": report.probed_at,
                    "python_version": report.python_version,
                    "frameworks": {k: asdict(v) for k, v in report.frameworks.items()},
                }
        _save_cache(path, cache)
    return [reports[i] for i in range(len(envs))]
