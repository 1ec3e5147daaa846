"""Who may act, and which data they may read: the one place every entry asks.

Data sources. :func:`resolve_source` turns a spec's ``data.source`` into what a run may read for a
user: a built-in ``sklearn:NAME`` (when ``data.builtin_datasets`` allows them), or the real,
absolute path of a file or folder inside one of the user's data roots (``[data] roots``, ``{user}``
substituted, or ``[data.users.NAME] roots``). Symbolic links are resolved before the check; ``..``
components, ``~``, NUL bytes and relative paths that land outside a root are refused. A relative
path is looked up under each root in turn (the first that holds it wins; none: the first root).
:func:`pin_source` returns the spec with that resolved source, which is what the registry stores and
the generated program reads. Callers: the command line's ``run`` and the portal's submit and
resubmit (both through :func:`schedulers.launch.submit_run`), the portal's spec import and data
probe; later entries (sweeps, ONNX import) call :func:`pin_source` too.

Identity on the command line. The user is the OS user who runs the command; acting for someone
else (``--user``) or over everyone (``--all-users``) is for the OS users listed in
``[auth] admins`` (:func:`acting_user`).

Lives in ``settings`` (not ``portal``) because the command line, the portal and the executors all
need it, and it reads nothing but the settings and the spec.
"""

from __future__ import annotations

import getpass
import os
import pwd
import re
from pathlib import Path, PurePosixPath

from core import datasets
from core.errors import FlowTrainError, Problem, SpecError
from core.spec import PipelineSpec
from settings.config import Settings

USER_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")


class AccessError(FlowTrainError):
    """A request without a valid user, an action the user may not take, or a path outside the user's roots."""

    exit_code = 2


def check_user_name(name: object) -> str:
    """Return ``name`` if it is a safe user name (it ends up in paths and the run registry)."""
    if not isinstance(name, str) or not USER_PATTERN.fullmatch(name):
        raise AccessError(f"user name {name!r:.80} is not accepted; expected letters, digits and . _ @ - "
                          "(at most 64 characters, not starting with a dot or dash)")
    return name


def data_roots(user: str, settings: Settings) -> list[Path]:
    """The user's data roots, ``{user}`` substituted, resolved (symlinks followed)."""
    check_user_name(user)
    raw = settings.user_data_roots.get(user, settings.data_roots)
    return [Path(r.replace("{user}", user)).resolve() for r in raw]


def _roots_text(roots: list[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "(none configured)"


def confine(user: str, path: str | Path, settings: Settings) -> Path:
    """Resolve ``path`` (absolute, or relative to one of the user's roots) inside one of the user's roots.

    Refuses ``..`` components, ``~``, NUL bytes, and anything whose real location (after symlinks)
    is outside every root. Returns the resolved path (which need not exist yet).
    """
    text = str(path)
    roots = data_roots(user, settings)
    where = f"your data roots ({_roots_text(roots)})"
    if "\x00" in text:
        raise AccessError("a data path may not contain NUL bytes")
    if not text.strip():
        raise AccessError(f"the data path is empty; choose a file or folder under {where}")
    if text.startswith("~"):
        raise AccessError(f"data path {text!r:.200} starts with '~'; give the absolute path, inside {where}")
    if ".." in PurePosixPath(text).parts:
        raise AccessError(f"data path {text!r:.200} contains '..'; give a path inside {where} without it")
    if not roots:
        raise AccessError(f"no data roots are configured for {user}; add [data] roots to the settings file")
    given = Path(text)
    try:
        if given.is_absolute():
            candidates = [given]
        else:
            candidates = [root / given for root in roots]
            candidates = [c for c in candidates if c.exists() or c.is_symlink()][:1] or candidates[:1]
        real = candidates[0].resolve()
    except OSError as exc:  # a name too long for the file system, a loop of links: the path cannot be a data path
        raise AccessError(f"data path {text!r:.200} cannot be looked up ({exc.strerror or exc}); give a shorter "
                          f"path to an existing file or folder inside {where}") from exc
    for root in roots:
        if real == root or real.is_relative_to(root):
            return real
    raise AccessError(f"data path {text!r:.200} resolves to {real}, outside {where}; put the data under one of "
                      "them (symbolic links pointing outside are not followed)")


def resolve_source(user: str, source: str, settings: Settings) -> str:
    """The data source ``user`` may read: a built-in dataset's name, or the real absolute path
    inside the user's roots. :class:`AccessError` naming ``data.source`` and the roots otherwise."""
    if source.startswith("sklearn:"):
        if not settings.builtin_datasets:
            raise AccessError(f"data.source {source!r}: built-in datasets are switched off on this portal "
                              f"(data.builtin_datasets); use a file under your data roots "
                              f"({_roots_text(data_roots(user, settings))})")
        if datasets.builtin(source) is None:
            raise AccessError(f"data.source {source!r} is not a built-in dataset; choose one of "
                              f"{', '.join(datasets.BUILTIN)}")
        return source
    try:
        return str(confine(user, source, settings))
    except AccessError as err:
        raise AccessError(f"data.source refused: {err}") from None


def resolve_init_weights(user: str, path: str, settings: Settings, spec_dir: Path | None = None) -> str:
    """The real absolute path of ``training.init_weights``: next to the spec file (``spec_dir``, when the
    spec came from one: a relative path without ``..`` that stays inside that folder), else inside the
    user's data roots (:func:`confine`). It must be an existing file."""
    given = PurePosixPath(path)
    if spec_dir is not None and "\x00" not in path and ".." not in given.parts and not path.startswith("~"):
        folder = spec_dir.resolve()
        candidate = (folder / path).resolve()
        if candidate.is_file() and (candidate.parent == folder or candidate.is_relative_to(folder)):
            return str(candidate)
    real = confine(user, path, settings)
    if not real.is_file():
        raise AccessError(f"{real} does not exist or is not a file")
    return str(real)


def pin_source(spec: PipelineSpec, user: str, settings: Settings, spec_dir: Path | None = None) -> PipelineSpec:
    """``spec`` with ``data.source`` (and ``training.init_weights``, if set) resolved for ``user`` (see the
    module docstring); ``spec_dir`` is the folder of the spec file, where init weights may lie too.

    Raises :class:`~core.errors.SpecError` with every refused path as a problem, so the portal and the
    command line show them like any other spec problem.
    """
    problems: list[Problem] = []
    roots = _roots_text(data_roots(user, settings))
    resolved = spec.data.source
    try:
        resolved = resolve_source(user, spec.data.source, settings)
    except AccessError as err:
        problems.append(Problem(
            "data.source", str(err).removeprefix("data.source refused: "), received=repr(spec.data.source)[:300],
            expected=f"a built-in dataset or a path inside your data roots ({roots})",
            fix="choose the data on the Editor page, or put it under one of your data roots"))
    weights = spec.training.init_weights
    if weights is not None:
        try:
            weights = resolve_init_weights(user, weights, settings, spec_dir)
        except AccessError as err:
            problems.append(Problem(
                "training.init_weights", str(err), received=repr(spec.training.init_weights)[:300],
                expected=f"a canonical weights file (.npz) next to the spec or inside your data roots ({roots})",
                fix="put the weights file next to the spec or under one of your data roots, or clear the field"))
    if problems:
        raise SpecError(problems)
    if resolved != spec.data.source:
        spec = spec.model_copy(update={"data": spec.data.model_copy(update={"source": resolved})})
    if weights != spec.training.init_weights:
        spec = spec.model_copy(update={"training": spec.training.model_copy(update={"init_weights": weights})})
    return spec


def os_user() -> str:
    """The OS user running this process (the effective uid's name)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return getpass.getuser()


def acting_user(settings: Settings, requested: str | None = None, *, me: str | None = None) -> str:
    """The user a command-line command acts as: the OS user, or ``requested`` when the OS user is one
    of ``[auth] admins``."""
    me = me or os_user()
    if requested is not None and requested != me:
        if me not in settings.auth.admins:
            raise AccessError(f"--user {requested}: only the administrators listed in [auth] admins may act for "
                              f"other users; you are {me}. Leave --user out to act as yourself")
        _check_home_is_yours(settings, f"--user {requested}")
    return check_user_name(requested or me)


def _check_home_is_yours(settings: Settings, flag: str) -> None:
    """An administrator acts for others only on a home that no one else can write: its registry's
    records (run directories, log paths, job ids, interpreters) are then FlowTrain's own, not a
    user's forgery for the administrator to act on (read, cancel, run)."""
    try:
        st = settings.home.stat()
    except FileNotFoundError:
        return  # nothing recorded yet
    except OSError as exc:
        raise AccessError(f"{flag}: the home {settings.home} cannot be checked ({exc.strerror})") from None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        raise AccessError(f"{flag}: the home {settings.home} belongs to {owner} (mode {st.st_mode & 0o777:o}), not "
                          f"to you alone: its records are not FlowTrain's own to act on. Act for others as the "
                          "account that owns the shared home (e.g. sudo -u that account), never on a home another "
                          "user can write")


def listing_user(settings: Settings, requested: str | None = None, *, all_users: bool = False,
                 me: str | None = None) -> str | None:
    """Whose runs a listing shows: :func:`acting_user`'s, or everyone's (``None``) for an
    administrator who asks with ``all_users``."""
    me = me or os_user()
    if all_users:
        if me not in settings.auth.admins:
            raise AccessError(f"--all-users: only the administrators listed in [auth] admins may list every "
                              f"user's runs; you are {me}")
        _check_home_is_yours(settings, "--all-users")
        return None
    return acting_user(settings, requested, me=me)
