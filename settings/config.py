"""FlowTrain's settings: one object, read the same way by the portal and the command line.

Where each setting comes from, first match wins:

- home (runs, registry, local-executor state, discovery cache): ``$FLOWTRAIN_HOME``, else the
  settings file's ``home``, else ``./var``; always absolute (:func:`flowtrain_home` is the one place
  that resolves it).
- scheduler: ``$FLOWTRAIN_SCHEDULER``, else the settings file's ``scheduler``, else the
  environments file's ``scheduler``, else ``local``.
- execution environments: the file named by ``$FLOWTRAIN_ENVIRONMENTS``, else the settings file's
  ``environments_file``, else one environment, this interpreter (format: :mod:`settings.environments`).
- everything else (data roots, sign-in): the settings file named by ``$FLOWTRAIN_CONFIG``.

Example ``flowtrain.toml``::

    home = "/srv/flowtrain"            # runs, registry, logs; FLOWTRAIN_HOME overrides it
    scheduler = "slurm"                # "local" (default) or "slurm"; FLOWTRAIN_SCHEDULER overrides it
    environments_file = "envs.toml"    # execution environments; FLOWTRAIN_ENVIRONMENTS overrides it

    [data]
    roots = ["/scratch/{user}", "/datasets"]   # {user} becomes the signed-in user's name
    builtin_datasets = true

    [data.users.alice]                 # roots for one user instead of the shared list
    roots = ["/project/vision"]

    [portal]
    address = "127.0.0.1"              # where scripts/portal.sh binds; FLOWTRAIN_ADDRESS overrides it
    max_onnx_upload_mb = 2048          # the largest ONNX model the editor imports (to disk in pieces)

    [auth]
    mode = "header"                    # "header": behind a reverse proxy that signs users in; "local"
    header = "X-Remote-User"           # the identity header the proxy sets (exactly once per request)
    proxy_secret_file = "proxy.secret" # the proxy also sends this secret (mode 0600 file) ...
    proxy_secret_header = "X-FlowTrain-Proxy-Secret"
    trusted_proxies = ["10.0.0.5"]     # ... and/or connects from one of these addresses (not loopback)
    admins = ["hpcadmin"]              # may use --user / --all-users on the command line
    session_hours = 8                  # mode = "local" with logins: a sign-in lasts this long
    # mode = "session": one user's own portal (the Open OnDemand app, deploy/ondemand/flowtrain):
    # secret_file = "secret"           # each browser session shows the secret in this file (?secret=...)

    [auth.local_users]                 # mode = "local": name = hash from portal.users.hash_password
    alice = "pbkdf2_sha256$600000$...$..."

Header mode needs a trusted proxy (a secret, trusted addresses, or both): without one, anyone who
reaches the port could name any user. Deployment: README, section "Deployment".

    [slurm]                            # how the Slurm executor reaches slurmctld (docs/pyslurm.md)
    transport = "rest"                 # "auto" (default), "commands", "pyslurm" or "rest";
                                       # FLOWTRAIN_SLURM_TRANSPORT overrides it
    rest_url = "http://slurm-rest.example.org:6820"   # slurmrestd; FLOWTRAIN_SLURM_REST_URL overrides
    rest_token = "scontrol"            # the JWT: "scontrol" (`scontrol token`, renewed before it
                                       # expires), "env" ($SLURM_JWT) or a file holding it;
                                       # FLOWTRAIN_SLURM_REST_TOKEN overrides

    [selector]                         # the framework selector's speed measurements (docs/selector.md)
    calibrate = "missing"              # "never" (default): rank by cached measurements or the MACs
                                       # model; "missing": run calibration jobs first where none is
                                       # cached or it is stale; FLOWTRAIN_CALIBRATE overrides
    max_age_days = 30                  # a measurement older than this is stale
    steps = 20                         # optimizer steps a calibration job times (after 3 warm-up ones)
    window_s = 10                      # ...or more, so that they last about this long (0: just steps)
    time_limit_min = 10                # the calibration job's time limit
    queue_wait_s = 600                 # give up (and cancel) a calibration job not started by then

    [tracking]                         # log every completed run to MLflow (docs/tracking.md)
    mlflow_uri = "http://mlflow.example.org:5000"   # MLFLOW_TRACKING_URI overrides it
    experiment = "FlowTrain"           # the experiment the runs go to (default)

Relative paths are resolved against the folder of the config file (or the working directory when
there is no file; a relative ``FLOWTRAIN_HOME`` against the working directory). Unknown keys are
errors: a misspelt setting must not be silently ignored. Each key's type, default and overriding
variable are declared once, in :mod:`settings.settings_file` (``python -m flowtrain settings-schema``
prints them as JSON Schema); this module applies the overrides, resolves paths and checks what a
type cannot say (a header sign-in needs a trusted proxy, a secret file must be private…).

This package knows nothing of the portal, the executors or the command line; they all read it.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.errors import CommandError, FlowTrainError, Problem
from settings.environments import SCHEDULERS, Environment, EnvironmentsFile, load_environments
from settings.settings_file import (
    CONFIG_ENV,
    ENVIRONMENTS_ENV,
    HOME_ENV,
    SCHEDULER_ENV,
    TRANSPORT_ENV,
    AuthTable,
    PortalTable,
    SelectorTable,
    SettingsFile,
    SlurmTable,
    Table,
    TrackingTable,
    check_value,
    default,
    env_var,
    parse,
)

__all__ = ["CONFIG_ENV", "ENVIRONMENTS_ENV", "HOME_ENV", "SCHEDULER_ENV", "TRANSPORT_ENV", "SLURM_TRANSPORTS",
           "AuthSettings", "ConfigError", "SelectorSettings", "Settings", "SlurmSettings", "flowtrain_home",
           "load_settings", "slurm_settings"]

CALIBRATE_MODES = ("never", "missing")
SLURM_TRANSPORTS = ("auto", "commands", "pyslurm", "rest")
MIN_SECRET_LENGTH = 16

Scheduler = Literal["local", "slurm"]
AuthMode = Literal["header", "local", "session"]


class ConfigError(FlowTrainError):
    """The settings file cannot be read or holds wrong values; the message names file and key of each.

    ``problems`` holds every one found (a problem whose location is a ``FLOWTRAIN_*`` variable came
    from the environment, not the file).
    """

    exit_code = 2

    def __init__(self, problems: Sequence[Problem], where: str) -> None:
        self.problems = list(problems)
        lines = [_render(p, where) for p in self.problems]
        super().__init__(lines[0] if len(lines) == 1 else
                         f"{len(lines)} problems in the settings:\n" + "\n".join(f"  - {line}" for line in lines))


def _render(p: Problem, where: str) -> str:
    text = p.location + (f" = {p.received}" if p.received is not None else "") + f" {p.message}".rstrip()
    text = text.strip()
    text += f"; expected {p.expected}" if p.expected else ""
    text += f". Fix: {p.fix}" if p.fix else ""
    return text if p.location.startswith("FLOWTRAIN_") else f"{where}: {text}"


@dataclass(frozen=True)
class AuthSettings:
    mode: AuthMode = default(AuthTable, "mode")
    header: str = default(AuthTable, "header")
    # name -> password hash (portal.users.hash_password). Empty: the portal's OS user, no login form.
    local_users: Mapping[str, str] = field(default_factory=dict)
    # Header mode: the proxy proves itself with this secret (read from proxy_secret_file) in
    # proxy_secret_header, and/or by connecting from one of trusted_proxies (addresses or networks).
    proxy_secret: str | None = field(default=None, repr=False)
    proxy_secret_header: str = default(AuthTable, "proxy_secret_header")
    trusted_proxies: tuple[str, ...] = ()
    # OS users who may act for others on the command line (--user, --all-users).
    admins: tuple[str, ...] = ()
    session_hours: float = default(AuthTable, "session_hours")
    # mode "session": the file holding the secret a browser session must present (the portal's OS
    # user is the only user; deploy/ondemand/flowtrain writes it per session).
    secret_file: Path | None = None


@dataclass(frozen=True)
class SlurmSettings:
    """How the Slurm executor talks to the cluster (see :mod:`schedulers.slurm.pyslurm_transport`)."""

    transport: str = default(SlurmTable, "transport")  # one of SLURM_TRANSPORTS
    rest_url: str | None = None  # slurmrestd, e.g. "http://127.0.0.1:6820"; needed by "rest"
    rest_token: str = default(SlurmTable, "rest_token")  # "scontrol", "env" ($SLURM_JWT) or an absolute path
    source: str = "(defaults)"  # where transport was set, for messages


@dataclass(frozen=True)
class SelectorSettings:
    """Calibration of the framework selector's speeds (:mod:`schedulers.calibration`)."""

    calibrate: str = default(SelectorTable, "calibrate")  # one of CALIBRATE_MODES
    max_age_days: float = default(SelectorTable, "max_age_days")
    steps: int = default(SelectorTable, "steps")
    window_s: float = default(SelectorTable, "window_s")
    time_limit_min: int = default(SelectorTable, "time_limit_min")
    queue_wait_s: float = default(SelectorTable, "queue_wait_s")


@dataclass(frozen=True)
class TrackingSettings:
    """Where completed runs are logged (:mod:`schedulers.tracking`); no URI: nowhere."""

    mlflow_uri: str | None = None
    experiment: str = default(TrackingTable, "experiment")
    source: str = "(default)"  # where the URI was set, for messages


@dataclass(frozen=True)
class Settings:
    home: Path
    data_roots: tuple[str, ...]  # absolute; may contain "{user}"
    user_data_roots: Mapping[str, tuple[str, ...]]
    builtin_datasets: bool = True
    scheduler: Scheduler = "local"
    environments_file: Path | None = None
    environments: tuple[Environment, ...] = ()
    environments_source: str = "(built-in default)"
    auth: AuthSettings = field(default_factory=AuthSettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    config_path: Path | None = None
    portal_address: str = default(PortalTable, "address")
    max_onnx_upload_mb: int = default(PortalTable, "max_onnx_upload_mb")  # the site's limit (default 2 GB)
    selector: SelectorSettings = field(default_factory=SelectorSettings)
    tracking: TrackingSettings = field(default_factory=TrackingSettings)

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"


@dataclass
class _Reading:
    """One settings file being read: its models, where relative paths start, the environment, and
    every problem found so far (raised together at the end)."""

    file: SettingsFile
    where: str
    base: Path
    work_dir: Path
    env: Mapping[str, str]
    problems: list[Problem] = field(default_factory=list)

    def override(self, table: type[Table], key: str, file_value: Any) -> tuple[Any, str | None]:
        """The key's value and, when its declared variable is set, that variable's name."""
        var = env_var(table, key)
        value = self.env.get(var)
        if not value:
            return file_value, None
        if table is SlurmTable and key == "transport":
            value = value.strip().lower()  # FLOWTRAIN_SLURM_TRANSPORT=Commands is fine
        self.problems += check_value(table, key, value, var)
        return value, var

    def fail(self, location: str, message: str, received: Any = None, expected: str | None = None,
             fix: str | None = None) -> None:
        self.problems.append(Problem(location, message, received=None if received is None else repr(received),
                                     expected=expected, fix=fix))

    def done(self) -> None:
        if self.problems:
            raise ConfigError(self.problems, self.where)


def load_settings(path: str | Path | None = None, environ: Mapping[str, str] | None = None,
                  cwd: str | Path | None = None) -> Settings:
    """Read the settings file (``path``, else ``$FLOWTRAIN_CONFIG``, else none), the environments
    file and the ``FLOWTRAIN_*`` variables (``environ``, default ``os.environ``) into one object."""
    config_path, r = _reading(path, environ, cwd)
    f = r.file
    home = _resolve_home(r)
    env_file, from_env = r.override(SettingsFile, "environments_file", f.environments_file)
    environments_file = _abs(env_file, r.work_dir if from_env else r.base) if env_file else None
    slurm = _slurm(r)
    auth = _auth(r)
    address = _portal_address(r)
    selector = _selector(r)
    tracking = _tracking(r)
    r.done()
    envs = load_environments(environments_file)
    return Settings(
        home=home,
        data_roots=tuple(str(_abs(root, r.base)) for root in f.data.roots),
        user_data_roots={name: tuple(str(_abs(root, r.base)) for root in user.roots)
                         for name, user in f.data.users.items()},
        builtin_datasets=f.data.builtin_datasets,
        scheduler=_resolve_scheduler(r.env, f.scheduler, envs),  # type: ignore[arg-type]
        environments_file=environments_file,
        environments=envs.environments,
        environments_source=envs.source,
        auth=auth,
        slurm=slurm,
        config_path=config_path,
        portal_address=address,
        max_onnx_upload_mb=f.portal.max_onnx_upload_mb,
        selector=selector,
        tracking=tracking,
    )


def flowtrain_home(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """The home folder alone (``$FLOWTRAIN_HOME`` > the settings file's ``home`` > ``./var``), absolute.

    For defaults deep inside the executors and the registry, which need the home but not the rest.
    """
    _, r = _reading(None, environ, cwd)
    home = _resolve_home(r)
    r.done()
    return home


def slurm_settings(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> SlurmSettings:
    """The ``[slurm]`` settings alone (the variables > the settings file > defaults), for the Slurm
    executor, which needs them but not the rest."""
    _, r = _reading(None, environ, cwd)
    slurm = _slurm(r)
    r.done()
    return slurm


def _reading(path: str | Path | None, environ: Mapping[str, str] | None,
             cwd: str | Path | None) -> tuple[Path | None, _Reading]:
    """The settings file read through its models; every problem in it at once, or none."""
    env = os.environ if environ is None else environ
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    chosen = path if path is not None else env.get(CONFIG_ENV) or None
    config_path = (work_dir / Path(chosen).expanduser()).resolve() if chosen is not None else None
    where = str(config_path) if config_path else "(defaults)"
    file, problems = parse(_read_toml(config_path) if config_path else {})
    if file is None:
        raise ConfigError(problems, where)
    return config_path, _Reading(file, where, config_path.parent if config_path else work_dir, work_dir, env)


def _resolve_home(r: _Reading) -> Path:
    """The one place that decides the home folder. Absolute and symlink-free: run directories under it
    are handed to slurmd and to later portals, which must find them from anywhere."""
    home, from_env = r.override(SettingsFile, "home", r.file.home)
    return _abs(home, r.work_dir if from_env else r.base).resolve()


def _resolve_scheduler(env: Mapping[str, str], file_scheduler: str | None, envs: EnvironmentsFile) -> str:
    """``$FLOWTRAIN_SCHEDULER`` > the settings file > the environments file > local."""
    from_env = env.get(env_var(SettingsFile, "scheduler"))
    if from_env:
        if from_env not in SCHEDULERS:
            raise CommandError(f"{SCHEDULER_ENV}={from_env!r}; expected {' or '.join(SCHEDULERS)}")
        return from_env
    return file_scheduler or envs.scheduler or "local"


def _slurm(r: _Reading) -> SlurmSettings:
    table = r.file.slurm
    transport, var = r.override(SlurmTable, "transport", table.transport)
    source = var or (f"{r.where}: slurm.transport" if "transport" in table.model_fields_set else "(default)")
    url, url_var = r.override(SlurmTable, "rest_url", table.rest_url or None)
    if url is not None and not url.startswith(("http://", "https://")):
        r.fail(url_var or "slurm.rest_url", "is not an http:// or https:// URL of slurmrestd", received=url)
    token, token_var = r.override(SlurmTable, "rest_token", table.rest_token)
    if token not in ("scontrol", "env"):
        token = str(_abs(token, r.work_dir if token_var else r.base))
    if transport == "rest" and url is None:
        r.problems.append(Problem(var or "slurm.transport", "needs the address of slurmrestd", received='"rest"',
                                  fix=f"set slurm.rest_url in the settings file or {env_var(SlurmTable, 'rest_url')}"
                                      " (e.g. http://127.0.0.1:6820)"))
    return SlurmSettings(transport=transport, rest_url=url, rest_token=token, source=source)


def _selector(r: _Reading) -> SelectorSettings:
    table = r.file.selector
    mode, _ = r.override(SelectorTable, "calibrate", table.calibrate)
    return SelectorSettings(calibrate=mode, max_age_days=float(table.max_age_days), steps=table.steps,
                            window_s=float(table.window_s), time_limit_min=table.time_limit_min, queue_wait_s=float(table.queue_wait_s))


def _tracking(r: _Reading) -> TrackingSettings:
    table = r.file.tracking
    uri, var = r.override(TrackingTable, "mlflow_uri", table.mlflow_uri or None)
    where = var or "tracking.mlflow_uri"
    if uri is not None and not uri.startswith(("http://", "https://")):
        r.fail(where, "is not the http:// or https:// address of an MLflow tracking server", received=uri,
               fix="start one with `mlflow server` and give its address, e.g. http://127.0.0.1:5000")
    source = var or (f"{r.where}: tracking.mlflow_uri" if uri else "(default)")
    return TrackingSettings(mlflow_uri=uri.rstrip("/") if uri else None, experiment=table.experiment, source=source)


def _auth(r: _Reading) -> AuthSettings:
    auth = r.file.auth
    if auth.mode == "session" and not auth.secret_file:
        r.fail("auth.mode", "needs auth.secret_file, the file holding the secret that opens the portal",
               received="session")
    secret = _read_secret(r, _abs(auth.proxy_secret_file, r.base)) if auth.proxy_secret_file else None
    proxies = tuple(p for p in (_proxy_network(r, text) for text in auth.trusted_proxies) if p is not None)
    if auth.mode == "header" and secret is None and not auth.trusted_proxies:
        r.fail("auth.mode", "needs a trusted proxy", received="header",
               fix="set auth.proxy_secret_file (a secret the proxy sends in auth.proxy_secret_header) and/or "
                   "auth.trusted_proxies (the proxy's addresses). Without one, anyone who reaches the port could "
                   "sign in as anyone")
    loopback = [p for p in proxies if ipaddress.ip_network(p).overlaps(_LOOPBACK_V4)
                or ipaddress.ip_network(p).overlaps(_LOOPBACK_V6)]
    if loopback and secret is None:
        r.fail("auth.trusted_proxies", f"lists the loopback address {loopback[0]}: every local user can connect "
               "from it (and the server takes the client address from X-Forwarded-For on loopback connections)",
               fix="a proxy on this host must prove itself with auth.proxy_secret_file")
    return AuthSettings(mode=auth.mode, header=auth.header, local_users=dict(auth.local_users),
                        proxy_secret=secret, proxy_secret_header=auth.proxy_secret_header, trusted_proxies=proxies,
                        admins=tuple(auth.admins), session_hours=float(auth.session_hours),
                        secret_file=_abs(auth.secret_file, r.base) if auth.secret_file else None)


_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.ip_network("::1/128")


def _proxy_network(r: _Reading, text: str) -> str | None:
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        r.fail("auth.trusted_proxies", "has an entry that is not an IP address or network", received=text,
               expected='e.g. "10.0.0.5" or "10.0.0.0/24"')
        return None


def _read_secret(r: _Reading, path: Path) -> str | None:
    """The proxy secret: the file's first line. The file must be readable by its owner only."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        r.fail("auth.proxy_secret_file", f"{path} cannot be read ({exc.strerror})")
        return None
    if mode & 0o077:
        r.fail("auth.proxy_secret_file", f"{path} is readable by others (mode {mode & 0o777:o})", fix="chmod 600 it")
        return None
    secret = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(secret) < MIN_SECRET_LENGTH:
        r.fail("auth.proxy_secret_file", f"{path} holds a secret shorter than {MIN_SECRET_LENGTH} characters",
               fix="write a long random one (openssl rand -hex 32)")
        return None
    return secret


def _portal_address(r: _Reading) -> str:
    """Where scripts/portal.sh binds: ``$FLOWTRAIN_ADDRESS`` > ``[portal] address`` > 127.0.0.1."""
    address, var = r.override(PortalTable, "address", r.file.portal.address)
    if not address.startswith("unix://"):
        try:
            ipaddress.ip_address(address)
        except ValueError:
            r.fail(var or "portal.address", "is not an IP address or unix://PATH", received=address,
                   expected='e.g. "127.0.0.1"')
    return address


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise _one(path, f"no such settings file (named by {CONFIG_ENV})",
                   f"create it or unset {CONFIG_ENV} to use the defaults") from None
    except tomllib.TOMLDecodeError as exc:
        raise _one(path, f"not valid TOML ({exc})") from None
    except OSError as exc:
        raise _one(path, f"cannot be read ({exc.strerror})") from None


def _one(path: Path, message: str, fix: str | None = None) -> ConfigError:
    """The file as a whole is the problem: its path is the location."""
    return ConfigError([Problem("", message, fix=fix)], str(path))


def _abs(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).absolute()
