"""Who is asking, and which data they may read.

The portal reads the request headers (``st.context.headers``) and passes them here as a plain
mapping; this module never imports Streamlit. Two modes (``[auth] mode`` in the settings):

- ``header``: the portal sits behind a reverse proxy that authenticates users and sets a trusted
  header (``X-Remote-User`` by default, as Open OnDemand does). A request without it is refused.
  Only use this mode when the proxy is the only way to reach the portal: anyone who can reach the
  port directly can set the header.
- ``local``: the standalone default. With no ``[auth.local_users]`` the portal's own OS user is
  the only user (a workstation); with users configured, a login form checks a password hash.

Data paths are confined to the roots configured for the user: a path is resolved (following
symlinks) and must stay inside one of them, and ``..`` components are refused outright.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from core import datasets
from core.errors import FlowTrainError
from settings import Settings

USER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$")
PBKDF2_ITERATIONS = 200_000


class AccessError(FlowTrainError):
    """A request without a valid user, or a path outside the user's data roots."""

    exit_code = 2


def check_user_name(name: str) -> str:
    """Return ``name`` if it is a safe user name (it ends up in paths and the run registry)."""
    if not isinstance(name, str) or not USER_PATTERN.match(name):
        raise AccessError(f"user name {name!r:.80} is not accepted; expected letters, digits and . _ @ - "
                          "(at most 64 characters, not starting with a dot or dash)")
    return name


def user_from_headers(headers: Mapping[str, str], settings: Settings) -> str:
    """The user named by the trusted header (``header`` mode). Header names are case-insensitive."""
    wanted = settings.auth.header.lower()
    value = None
    for key, val in headers.items():
        if key.lower() == wanted:
            value = val
            break
    if value is None or not value.strip():
        raise AccessError(f"this request has no {settings.auth.header} header; the portal is configured to trust "
                          "a reverse proxy for sign-in (auth.mode = \"header\"). Open it through the proxy, or "
                          "set auth.mode = \"local\" for a standalone portal")
    return check_user_name(value.strip())


def check_session_secret(given: str, settings: Settings) -> None:
    """Raise :class:`AccessError` unless ``given`` is the secret of this portal session
    (``auth.mode = "session"``: the file ``auth.secret_file`` holds it)."""
    path = settings.auth.secret_file
    try:
        expected = path.read_text(encoding="utf-8").strip() if path else ""
    except OSError as exc:
        raise AccessError(f"the session secret ({path}) cannot be read: {exc.strerror}; restart the session") from None
    if len(expected) < 16:
        raise AccessError(f"the session secret in {path} is missing or shorter than 16 characters; restart the session")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise AccessError("this FlowTrain session belongs to the user who started it: open it with the Connect button "
                          "of that Open OnDemand session (the request carried no valid session secret)")


def default_local_user() -> str:
    """The portal process's own OS user: the only user of a standalone portal without logins."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = "researcher"
    return name if USER_PATTERN.match(name) else "researcher"


def login_required(settings: Settings) -> bool:
    return settings.auth.mode == "local" and bool(settings.auth.local_users)


def hash_password(password: str, salt: str | None = None, iterations: int = PBKDF2_ITERATIONS) -> str:
    """``pbkdf2_sha256$iterations$salt$hexdigest``: what ``[auth.local_users]`` holds."""
    salt = salt or secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations).hex()
    return f"pbkdf2_sha256${iterations}${salt}${digest}"


def check_login(name: str, password: str, settings: Settings) -> str:
    """Return the user name when the password matches its configured hash; raise AccessError otherwise."""
    stored = settings.auth.local_users.get(name)
    if stored is None:
        raise AccessError("unknown user or wrong password")
    try:
        scheme, iterations, salt, _digest = stored.split("$")
        if scheme != "pbkdf2_sha256":
            raise ValueError(scheme)
        expected = hash_password(password, salt, int(iterations))
    except ValueError:
        raise AccessError(f"the stored password of {name!r} is not a pbkdf2_sha256 hash; regenerate it with "
                          "portal.users.hash_password") from None
    if not hmac.compare_digest(expected, stored):
        raise AccessError("unknown user or wrong password")
    return check_user_name(name)


def data_roots(user: str, settings: Settings) -> list[Path]:
    """The user's data roots, ``{user}`` substituted, resolved (symlinks followed)."""
    check_user_name(user)
    raw = settings.user_data_roots.get(user, settings.data_roots)
    return [Path(r.replace("{user}", user)).resolve() for r in raw]


def confine(user: str, path: str | Path, settings: Settings) -> Path:
    """Resolve ``path`` (absolute, or relative to the user's first root) inside one of the user's roots.

    Refuses ``..`` components, NUL bytes, and anything whose real location (after symlinks) is
    outside every root. Returns the resolved path (which need not exist yet).
    """
    text = str(path)
    if "\x00" in text:
        raise AccessError("a data path may not contain NUL bytes")
    if not text.strip():
        raise AccessError("the data path is empty; choose a file or folder under one of your data roots")
    if ".." in PurePosixPath(text).parts or ".." in Path(text).parts:
        raise AccessError(f"data path {text!r:.200} contains '..'; give a path inside your data roots without it")
    roots = data_roots(user, settings)
    if not roots:
        raise AccessError(f"no data roots are configured for {user}; add [data] roots to the settings file")
    candidate = Path(text).expanduser() if text.startswith("~") else Path(text)
    if not candidate.is_absolute():
        candidate = roots[0] / candidate
    real = candidate.resolve()
    for root in roots:
        if real == root or real.is_relative_to(root):
            return real
    shown = ", ".join(str(r) for r in roots)
    raise AccessError(f"data path {text!r:.200} resolves to {real}, outside your data roots ({shown}); "
                      "put the data under one of them (symbolic links pointing outside are not followed)")


def check_source(user: str, source: str, settings: Settings) -> str:
    """A data-layer source the user may use: a built-in dataset, or a confined path (returned resolved)."""
    if source.startswith("sklearn:"):
        if not settings.builtin_datasets:
            raise AccessError("built-in datasets are switched off on this portal (data.builtin_datasets)")
        if datasets.builtin(source) is None:
            raise AccessError(f"unknown built-in dataset {source!r}; choose one of {', '.join(datasets.BUILTIN)}")
        return source
    return str(confine(user, source, settings))
