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
    time_limit_min = 10                # the calibration job's time limit
    queue_wait_s = 600                 # give up (and cancel) a calibration job not started by then

Relative paths are resolved against the folder of the config file (or the working directory when
there is no file; a relative ``FLOWTRAIN_HOME`` against the working directory). Unknown keys are
errors: a misspelt setting must not be silently ignored.

This package knows nothing of the portal, the executors or the command line; they all read it.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.errors import CommandError, FlowTrainError
from settings.environments import SCHEDULERS, Environment, EnvironmentsFile, load_environments

CONFIG_ENV = "FLOWTRAIN_CONFIG"
HOME_ENV = "FLOWTRAIN_HOME"
SCHEDULER_ENV = "FLOWTRAIN_SCHEDULER"
ENVIRONMENTS_ENV = "FLOWTRAIN_ENVIRONMENTS"
TRANSPORT_ENV = "FLOWTRAIN_SLURM_TRANSPORT"
REST_URL_ENV = "FLOWTRAIN_SLURM_REST_URL"
REST_TOKEN_ENV = "FLOWTRAIN_SLURM_REST_TOKEN"
CALIBRATE_ENV = "FLOWTRAIN_CALIBRATE"
CALIBRATE_MODES = ("never", "missing")
SLURM_TRANSPORTS = ("auto", "commands", "pyslurm", "rest")
DEFAULT_HOME = "var"
DEFAULT_DATA_ROOT = "data"
DEFAULT_HEADER = "X-Remote-User"
DEFAULT_SECRET_HEADER = "X-FlowTrain-Proxy-Secret"
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_SESSION_HOURS = 8.0
MIN_SECRET_LENGTH = 16

Scheduler = Literal["local", "slurm"]
AuthMode = Literal["header", "local", "session"]


class ConfigError(FlowTrainError):
    """The settings file cannot be read or holds a wrong value; the message names file and key."""

    exit_code = 2


@dataclass(frozen=True)
class AuthSettings:
    mode: AuthMode = "local"
    header: str = DEFAULT_HEADER
    # name -> password hash (portal.users.hash_password). Empty: the portal's OS user, no login form.
    local_users: Mapping[str, str] = field(default_factory=dict)
    # Header mode: the proxy proves itself with this secret (read from proxy_secret_file) in
    # proxy_secret_header, and/or by connecting from one of trusted_proxies (addresses or networks).
    proxy_secret: str | None = field(default=None, repr=False)
    proxy_secret_header: str = DEFAULT_SECRET_HEADER
    trusted_proxies: tuple[str, ...] = ()
    # OS users who may act for others on the command line (--user, --all-users).
    admins: tuple[str, ...] = ()
    session_hours: float = DEFAULT_SESSION_HOURS
    # mode "session": the file holding the secret a browser session must present (the portal's OS
    # user is the only user; deploy/ondemand/flowtrain writes it per session).
    secret_file: Path | None = None


@dataclass(frozen=True)
class SlurmSettings:
    """How the Slurm executor talks to the cluster (see :mod:`schedulers.slurm.pyslurm_transport`)."""

    transport: str = "auto"  # one of SLURM_TRANSPORTS
    rest_url: str | None = None  # slurmrestd, e.g. "http://127.0.0.1:6820"; needed by "rest"
    rest_token: str = "scontrol"  # "scontrol", "env" ($SLURM_JWT) or an absolute file path
    source: str = "(defaults)"  # where transport was set, for messages


@dataclass(frozen=True)
class SelectorSettings:
    """Calibration of the framework selector's speeds (:mod:`schedulers.calibration`)."""

    calibrate: str = "never"  # one of CALIBRATE_MODES
    max_age_days: float = 30.0
    steps: int = 20
    time_limit_min: int = 10
    queue_wait_s: float = 600.0


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
    portal_address: str = DEFAULT_ADDRESS
    selector: SelectorSettings = field(default_factory=SelectorSettings)

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"


_TOP_KEYS = {"home", "scheduler", "environments_file", "data", "auth", "portal", "slurm", "selector"}
_SELECTOR_KEYS = {"calibrate", "max_age_days", "steps", "time_limit_min", "queue_wait_s"}
_SLURM_KEYS = {"transport", "rest_url", "rest_token"}
_DATA_KEYS = {"roots", "builtin_datasets", "users"}
_AUTH_KEYS = {"mode", "header", "local_users", "proxy_secret_file", "proxy_secret_header", "trusted_proxies",
              "admins", "session_hours", "secret_file"}
_PORTAL_KEYS = {"address"}


def load_settings(path: str | Path | None = None, environ: Mapping[str, str] | None = None,
                  cwd: str | Path | None = None) -> Settings:
    """Read the settings file (``path``, else ``$FLOWTRAIN_CONFIG``, else none), the environments
    file and the ``FLOWTRAIN_*`` variables (``environ``, default ``os.environ``) into one object."""
    env = os.environ if environ is None else environ
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    config_path, doc = _config_doc(path, env, work_dir)
    base = config_path.parent if config_path else work_dir
    where = str(config_path) if config_path else "(defaults)"
    _check_keys(doc, _TOP_KEYS, "", where)

    home = _resolve_home(env, doc, base, work_dir, where)

    file_scheduler = _get(doc, "scheduler", str, "", where)
    if file_scheduler and file_scheduler not in SCHEDULERS:
        raise ConfigError(f"{where}: scheduler = {file_scheduler!r} is not known; expected \"local\" or \"slurm\"")

    env_file_value = _get(doc, "environments_file", str, "", where)
    environments_file = (_abs(env[ENVIRONMENTS_ENV], work_dir) if env.get(ENVIRONMENTS_ENV)
                         else _abs(env_file_value, base) if env_file_value else None)
    envs = load_environments(environments_file)
    scheduler = _resolve_scheduler(env, file_scheduler, envs)

    data = _table(doc, "data", where)
    _check_keys(data, _DATA_KEYS, "data.", where)
    roots = _str_list(data, "roots", [DEFAULT_DATA_ROOT], "data.", where)
    builtin = _get(data, "builtin_datasets", bool, True, where, "data.")
    user_roots: dict[str, tuple[str, ...]] = {}
    users = _table(data, "users", where, "data.")
    for name, table in users.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: data.users.{name} must be a table with `roots = [...]`")
        _check_keys(table, {"roots"}, f"data.users.{name}.", where)
        user_roots[name] = tuple(str(_abs(r, base)) for r in _str_list(table, "roots", [], f"data.users.{name}.",
                                                                         where))

    return Settings(
        home=home,
        data_roots=tuple(str(_abs(r, base)) for r in roots),
        user_data_roots=user_roots,
        builtin_datasets=builtin,
        scheduler=scheduler,  # type: ignore[arg-type]
        environments_file=environments_file,
        environments=envs.environments,
        environments_source=envs.source,
        auth=_auth(doc, where, base),
        slurm=_slurm(doc, env, base, work_dir, where),
        config_path=config_path,
        portal_address=_portal_address(doc, where),
        selector=_selector(doc, env, where),
    )


def flowtrain_home(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """The home folder alone (``$FLOWTRAIN_HOME`` > the settings file's ``home`` > ``./var``), absolute.

    For defaults deep inside the executors and the registry, which need the home but not the rest.
    """
    env = os.environ if environ is None else environ
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    config_path, doc = _config_doc(None, env, work_dir)
    where = str(config_path) if config_path else "(defaults)"
    return _resolve_home(env, doc, config_path.parent if config_path else work_dir, work_dir, where)


def slurm_settings(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> SlurmSettings:
    """The ``[slurm]`` settings alone (the variables > the settings file > defaults), for the Slurm
    executor, which needs them but not the rest."""
    env = os.environ if environ is None else environ
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    config_path, doc = _config_doc(None, env, work_dir)
    where = str(config_path) if config_path else "(defaults)"
    if config_path is not None:
        _check_keys(doc, _TOP_KEYS, "", where)
    return _slurm(doc, env, config_path.parent if config_path else work_dir, work_dir, where)


def _slurm(doc: Mapping[str, Any], env: Mapping[str, str], base: Path, work_dir: Path, where: str) -> SlurmSettings:
    table = _table(doc, "slurm", where)
    _check_keys(table, _SLURM_KEYS, "slurm.", where)
    transport = _get(table, "transport", str, "auto", where, "slurm.")
    source = f"{where}: slurm.transport" if "transport" in table else "(default)"
    if env.get(TRANSPORT_ENV):
        transport, source = env[TRANSPORT_ENV], TRANSPORT_ENV
    transport = transport.strip().lower()
    if transport not in SLURM_TRANSPORTS:
        raise ConfigError(f"{source} = {transport!r} is not one of {', '.join(SLURM_TRANSPORTS)}")
    url = env.get(REST_URL_ENV) or _get(table, "rest_url", str, "", where, "slurm.") or None
    if url is not None and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{REST_URL_ENV if env.get(REST_URL_ENV) else where + ': slurm.rest_url'} = {url!r} "
                          "is not an http:// or https:// URL of slurmrestd")
    token = env.get(REST_TOKEN_ENV) or _get(table, "rest_token", str, "scontrol", where, "slurm.")
    if token not in ("scontrol", "env"):
        token = str(_abs(token, work_dir if env.get(REST_TOKEN_ENV) else base))
    if transport == "rest" and url is None:
        raise ConfigError(f"{source} = \"rest\" needs the address of slurmrestd: set slurm.rest_url in the "
                          f"settings file or {REST_URL_ENV} (e.g. http://127.0.0.1:6820)")
    return SlurmSettings(transport=transport, rest_url=url, rest_token=token, source=source)


def _selector(doc: Mapping[str, Any], env: Mapping[str, str], where: str) -> SelectorSettings:
    table = _table(doc, "selector", where)
    _check_keys(table, _SELECTOR_KEYS, "selector.", where)
    mode = env.get(CALIBRATE_ENV) or _get(table, "calibrate", str, "never", where, "selector.")
    if mode not in CALIBRATE_MODES:
        origin = CALIBRATE_ENV if env.get(CALIBRATE_ENV) else f"{where}: selector.calibrate"
        raise ConfigError(f"{origin} = {mode!r} is not known; expected \"never\" or \"missing\"")
    numbers = {}
    for key, kind, default in (("max_age_days", (int, float), 30.0), ("steps", int, 20),
                               ("time_limit_min", int, 10), ("queue_wait_s", (int, float), 600.0)):
        value = _get(table, key, kind, default, where, "selector.")
        if isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{where}: selector.{key} = {value!r}; expected a positive number")
        numbers[key] = value
    return SelectorSettings(calibrate=mode, max_age_days=float(numbers["max_age_days"]), steps=int(numbers["steps"]),
                            time_limit_min=int(numbers["time_limit_min"]),
                            queue_wait_s=float(numbers["queue_wait_s"]))


def _config_doc(path: str | Path | None, env: Mapping[str, str], work_dir: Path) -> tuple[Path | None, dict[str, Any]]:
    chosen = path if path is not None else env.get(CONFIG_ENV) or None
    if chosen is None:
        return None, {}
    config_path = (work_dir / Path(chosen).expanduser()).resolve()
    return config_path, _read_toml(config_path)


def _resolve_home(env: Mapping[str, str], doc: Mapping[str, Any], base: Path, work_dir: Path, where: str) -> Path:
    """The one place that decides the home folder. Absolute and symlink-free: run directories under it
    are handed to slurmd and to later portals, which must find them from anywhere."""
    env_home = env.get(HOME_ENV)
    if env_home:
        return _abs(env_home, work_dir).resolve()
    return _abs(_get(doc, "home", str, DEFAULT_HOME, where), base).resolve()


def _resolve_scheduler(env: Mapping[str, str], file_scheduler: str, envs: EnvironmentsFile) -> str:
    from_env = env.get(SCHEDULER_ENV)
    if from_env:
        if from_env not in SCHEDULERS:
            raise CommandError(f"{SCHEDULER_ENV}={from_env!r}; expected {' or '.join(SCHEDULERS)}")
        return from_env
    return file_scheduler or envs.scheduler or "local"


def _auth(doc: Mapping[str, Any], where: str, base: Path) -> AuthSettings:
    auth_doc = _table(doc, "auth", where)
    _check_keys(auth_doc, _AUTH_KEYS, "auth.", where)
    mode = _get(auth_doc, "mode", str, "local", where, "auth.")
    if mode not in ("header", "local", "session"):
        raise ConfigError(f"{where}: auth.mode = {mode!r} is not known; expected \"header\" (behind a reverse "
                          "proxy that sets the user header), \"local\" or \"session\" (one user's own portal, "
                          "opened with a per-session secret)")
    session_secret = _get(auth_doc, "secret_file", str, "", where, "auth.")
    if mode == "session" and not session_secret:
        raise ConfigError(f"{where}: auth.mode = \"session\" needs auth.secret_file, the file holding the secret "
                          "that opens the portal")
    header = _header_name(auth_doc, "header", DEFAULT_HEADER, where)
    secret_header = _header_name(auth_doc, "proxy_secret_header", DEFAULT_SECRET_HEADER, where)
    local_users = _table(auth_doc, "local_users", where, "auth.")
    for name, value in local_users.items():
        if not isinstance(value, str):
            raise ConfigError(f"{where}: auth.local_users.{name} must be a password hash string "
                              "(from portal.users.hash_password)")
    secret_file = _get(auth_doc, "proxy_secret_file", str, "", where, "auth.")
    secret = _read_secret(_abs(secret_file, base), where) if secret_file else None
    proxies = tuple(_proxy_network(p, where) for p in _str_list(auth_doc, "trusted_proxies", [], "auth.", where))
    if mode == "header" and secret is None and not proxies:
        raise ConfigError(f"{where}: auth.mode = \"header\" needs a trusted proxy: set auth.proxy_secret_file (a "
                          "secret the proxy sends in auth.proxy_secret_header) and/or auth.trusted_proxies (the "
                          "proxy's addresses). Without one, anyone who reaches the port could sign in as anyone")
    loopback = [p for p in proxies if ipaddress.ip_network(p).overlaps(_LOOPBACK_V4)
                or ipaddress.ip_network(p).overlaps(_LOOPBACK_V6)]
    if loopback and secret is None:
        raise ConfigError(f"{where}: auth.trusted_proxies lists the loopback address {loopback[0]}: every local "
                          "user can connect from it (and the server takes the client address from "
                          "X-Forwarded-For on loopback connections). A proxy on this host must prove itself with "
                          "auth.proxy_secret_file")
    admins = tuple(_str_list(auth_doc, "admins", [], "auth.", where))
    hours = _get(auth_doc, "session_hours", (int, float), DEFAULT_SESSION_HOURS, where, "auth.")
    if not 0 < hours <= 24 * 30:
        raise ConfigError(f"{where}: auth.session_hours = {hours!r} must be more than 0 and at most 720")
    return AuthSettings(mode=mode, header=header, local_users=dict(local_users),  # type: ignore[arg-type]
                        proxy_secret=secret, proxy_secret_header=secret_header, trusted_proxies=proxies,
                        admins=admins, session_hours=float(hours),
                        secret_file=_abs(session_secret, base) if session_secret else None)


_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.ip_network("::1/128")


def _header_name(doc: Mapping[str, Any], key: str, default: str, where: str) -> str:
    value = _get(doc, key, str, default, where, "auth.")
    if not value or not all(c.isalnum() or c in "-_" for c in value):
        raise ConfigError(f"{where}: auth.{key} = {value!r} is not an HTTP header name")
    return value


def _proxy_network(text: str, where: str) -> str:
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise ConfigError(f"{where}: auth.trusted_proxies has {text!r}, which is not an IP address or network "
                          "(e.g. \"10.0.0.5\" or \"10.0.0.0/24\")") from None


def _read_secret(path: Path, where: str) -> str:
    """The proxy secret: the file's first line. The file must be readable by its owner only."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: auth.proxy_secret_file {path} cannot be read ({exc.strerror})") from None
    if mode & 0o077:
        raise ConfigError(f"{where}: auth.proxy_secret_file {path} is readable by others (mode "
                          f"{mode & 0o777:o}); chmod 600 it")
    secret = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(f"{where}: auth.proxy_secret_file {path} holds a secret shorter than "
                          f"{MIN_SECRET_LENGTH} characters; write a long random one (openssl rand -hex 32)")
    return secret


def _portal_address(doc: Mapping[str, Any], where: str) -> str:
    portal = _table(doc, "portal", where)
    _check_keys(portal, _PORTAL_KEYS, "portal.", where)
    address = _get(portal, "address", str, DEFAULT_ADDRESS, where, "portal.")
    if not address.startswith("unix://"):
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ConfigError(f"{where}: portal.address = {address!r} is not an IP address (e.g. \"127.0.0.1\") "
                              "or unix://PATH") from None
    return address


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such settings file (named by {CONFIG_ENV}); create it or unset "
                          f"{CONFIG_ENV} to use the defaults") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None


def _check_keys(doc: Mapping[str, Any], known: set[str], prefix: str, where: str) -> None:
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {', '.join(prefix + k for k in unknown)}; "
                          f"expected some of {', '.join(prefix + k for k in sorted(known))}")


def _get(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any, where: str,
         prefix: str = "") -> Any:
    if key not in doc:
        return default
    value = doc[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        name = kind.__name__ if isinstance(kind, type) else "number"
        raise ConfigError(f"{where}: {prefix}{key} = {value!r} must be a {name}")
    return value


def _table(doc: Mapping[str, Any], key: str, where: str, prefix: str = "") -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {prefix}{key} must be a table ([{prefix}{key}])")
    return value


def _str_list(doc: Mapping[str, Any], key: str, default: list[str], prefix: str, where: str) -> list[str]:
    value = doc.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: {prefix}{key} must be a list of non-empty strings")
    return value


def _abs(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).absolute()
