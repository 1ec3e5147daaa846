"""Password hashes of ``[auth.local_users]``: make, verify at one cost for every answer, upgrade.

A hash is ``pbkdf2_sha256$iterations$salt$hexdigest``. Every sign-in attempt does the same PBKDF2
work, :func:`attempt_iterations` (the current count, or a stored one if larger), whether the name is
unknown, its hash current, or its hash older and cheaper (verified at its own count, the rest done
as padding): how long the answer takes does not tell which names exist. After a good password
against an older hash, :func:`upgrade_stored_hash` writes a hash with the current count into the
settings file in its place, so the file stops holding the cheaper one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from settings import Settings
from settings.access import AccessError

PBKDF2_ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256 (2023)
SCHEME = "pbkdf2_sha256"
_DUMMY_SALT = secrets.token_hex(16)


def hash_password(password: str, salt: str | None = None, iterations: int | None = None) -> str:
    """``pbkdf2_sha256$iterations$salt$hexdigest``: what ``[auth.local_users]`` holds
    (``iterations`` default: :data:`PBKDF2_ITERATIONS`)."""
    salt = salt or secrets.token_hex(16)
    count = PBKDF2_ITERATIONS if iterations is None else iterations
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), count).hex()
    return f"{SCHEME}${count}${salt}${digest}"


def parse_hash(name: str, stored: str) -> tuple[int, str]:
    """(iterations, salt) of a stored hash; :class:`AccessError` naming the user when it is not one."""
    try:
        scheme, iterations, salt, _digest = stored.split("$")
        if scheme != SCHEME or int(iterations) < 1:
            raise ValueError(scheme)
        return int(iterations), salt
    except ValueError:
        raise AccessError(f"the stored password of {name!r} is not a {SCHEME} hash; regenerate it with "
                          "portal.users.hash_password") from None


def _iterations(stored: str) -> int | None:
    parts = stored.split("$")
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None


def attempt_iterations(settings: Settings) -> int:
    """The PBKDF2 work of every sign-in attempt: the current count, or the largest stored one."""
    counts = [_iterations(h) for h in settings.auth.local_users.values()]
    return max([c for c in counts if c is not None] + [PBKDF2_ITERATIONS])


def verify(name: str, password: str, settings: Settings) -> bool:
    """Whether ``password`` is ``name``'s, after exactly :func:`attempt_iterations` of PBKDF2 work."""
    target = attempt_iterations(settings)
    stored = settings.auth.local_users.get(name)
    if stored is None:
        hmac.compare_digest(hash_password(password, _DUMMY_SALT, target), "x")
        return False
    iterations, salt = parse_hash(name, stored)
    ok = hmac.compare_digest(hash_password(password, salt, iterations), stored)
    if iterations < target:  # an older, cheaper hash: the rest of the work, so it answers no sooner
        hmac.compare_digest(hash_password(password, _DUMMY_SALT, target - iterations), "x")
    return ok


def needs_upgrade(name: str, settings: Settings) -> bool:
    stored = settings.auth.local_users.get(name)
    count = _iterations(stored) if stored is not None else None
    return count is not None and count < PBKDF2_ITERATIONS


def upgrade_stored_hash(name: str, password: str, settings: Settings) -> str:
    """Replace ``name``'s older hash in the settings file by one with :data:`PBKDF2_ITERATIONS`
    (call it after ``password`` was verified). Returns "" when done, else why not, for the user to
    pass on (the sign-in stands either way)."""
    stored = settings.auth.local_users[name]
    path = settings.config_path
    if path is None:
        return f"your password hash has fewer than {PBKDF2_ITERATIONS:,} iterations but no settings file holds it"
    new = hash_password(password)
    try:
        text = path.read_text(encoding="utf-8")
        if text.count(stored) != 1:
            return (f"your password hash in {path} is older (fewer than {PBKDF2_ITERATIONS:,} iterations) and was not "
                    "upgraded: the file does not hold it exactly once; ask the administrator to replace it with "
                    "portal.users.hash_password")
        if not os.access(path, os.W_OK):  # a read-only file is the administrator's word: not replaced
            raise PermissionError(13, "the file is not writable by the portal's account")
        mode = path.stat().st_mode & 0o777
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text.replace(stored, new))
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        return (f"your password hash in {path} is older (fewer than {PBKDF2_ITERATIONS:,} iterations) and could not "
                f"be upgraded ({exc.strerror}); ask the administrator to replace it with portal.users.hash_password")
    return ""
