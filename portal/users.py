"""Who is asking: the trusted proxy's identity header, or a local login.

The portal passes the request's headers (as name/value pairs, repeated headers kept) and the
client address from ``st.context`` to these functions; this module never imports Streamlit. The
deployment modes (README, "Deployment"):

- **Per user** (``[auth] mode = "local"``, no ``[auth.local_users]``): the portal runs as the user,
  as Open OnDemand runs apps, and the user is the portal's own OS user. No header is read.
- **Shared service behind a reverse proxy** (``mode = "header"``): the proxy signs users in and sets
  ``X-Remote-User`` (``[auth] header``). The portal believes the header only from the proxy: a
  request must carry the proxy's secret (``proxy_secret_file``, sent in ``proxy_secret_header``)
  and/or come from one of ``trusted_proxies`` (the connection's own address: never loopback, never
  one the request's ``X-Forwarded-For`` names); a request with the identity header twice, or with a
  comma-joined value, is refused (a proxy that appends would otherwise lose to the client).
- **Local logins** (``mode = "local"`` with ``[auth.local_users]``): a small standalone portal.
  PBKDF2-SHA256 with :data:`PBKDF2_ITERATIONS` (:mod:`portal.passwords`: older hashes still verify
  and are upgraded at sign-in; every attempt costs the same hashing, known name or not); failed
  sign-ins are throttled per user name from one address and per address (:class:`LoginThrottle`);
  a sign-in lasts ``[auth] session_hours``.

Which data a user may read: :mod:`settings.access` (re-exported here for the portal's views).
"""

from __future__ import annotations

import getpass
import hmac
import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from portal import passwords
from portal.passwords import PBKDF2_ITERATIONS, hash_password
from settings import Settings
from settings.access import USER_PATTERN, AccessError, check_user_name, confine, data_roots, resolve_source

__all__ = [
    "PBKDF2_ITERATIONS", "AccessError", "LoginThrottle", "check_login", "check_user_name", "confine",
    "data_roots", "default_local_user", "hash_password", "login_required", "resolve_source",
    "session_expired", "user_from_request",
]


def _header_values(headers: Iterable[tuple[str, str]], name: str) -> list[str]:
    wanted = name.lower()
    return [value for key, value in headers if key.lower() == wanted]


FORWARDED_FOR = "X-Forwarded-For"
_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.ip_network("::1/128")


def _forwarded_hosts(headers: list[tuple[str, str]]) -> set[str]:
    """Every address named in the request's ``X-Forwarded-For`` headers (ports and brackets dropped)."""
    hosts: set[str] = set()
    for value in _header_values(headers, FORWARDED_FOR):
        for entry in value.split(","):
            entry = entry.strip()
            if entry.startswith("[") and "]" in entry:
                entry = entry[1:entry.index("]")]
            elif entry.count(":") == 1:
                entry = entry.split(":", 1)[0]
            hosts.add(entry)
    return hosts


def _untrusted_address_reason(peer: str | None, headers: list[tuple[str, str]], settings: Settings,
                              secret_ok: bool) -> str:
    """Why ``peer`` does not prove the request came from a trusted proxy ("" when it does).

    Streamlit's server (uvicorn) replaces the client address with one from ``X-Forwarded-For`` when
    the connection comes from loopback, so any local user could name the proxy's address there. The
    address counts only when it is the connection's own: not loopback (every local user connects
    from it) and not an address the request's own ``X-Forwarded-For`` names. Otherwise only the
    secret proves the proxy, for a proxy on this host listed in ``trusted_proxies`` (the settings
    refuse a loopback entry without a secret).
    """
    where = f"this request came from {peer or 'this machine'}"
    try:
        address = ipaddress.ip_address(peer) if peer is not None else None
    except ValueError:
        return f"{where}, which is not an IP address"
    if address is None or address.is_loopback or _mapped_loopback(address):
        own = "(loopback)"
    elif peer in _forwarded_hosts(headers) or str(address) in _forwarded_hosts(headers):
        own = f"(as its {FORWARDED_FOR} header says, which the connection does not prove)"
    elif any(address in ipaddress.ip_network(net) for net in settings.auth.trusted_proxies):
        return ""
    else:
        return f"{where}, which is not one of the portal's trusted proxies (auth.trusted_proxies)"
    if secret_ok and any(_loopback_network(net) for net in settings.auth.trusted_proxies):
        return ""  # a proxy on this host, listed, that sent the secret
    return (f"{where} {own}: only the proxy secret proves a proxy on this machine (auth.proxy_secret_file), "
            "because every local user can connect from it and name any address")


def _loopback_network(text: str) -> bool:
    net = ipaddress.ip_network(text)
    return net.overlaps(_LOOPBACK_V4) if net.version == 4 else net.overlaps(_LOOPBACK_V6)


def _mapped_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped is not None and mapped.is_loopback


def user_from_request(headers: Iterable[tuple[str, str]], peer: str | None, settings: Settings) -> str:
    """The user named by the trusted proxy (``header`` mode); :class:`AccessError` for anything else.

    ``headers``: every (name, value) pair of the request, repeats included; names are
    case-insensitive. ``peer``: the client address as Streamlit reports it (``None`` for loopback).
    With ``trusted_proxies``, the address counts only as the connection's own (see
    :func:`_untrusted_address_reason`); a loopback connection always needs the secret.
    """
    auth = settings.auth
    pairs = list(headers)
    if auth.proxy_secret is not None:
        sent = _header_values(pairs, auth.proxy_secret_header)
        if len(sent) != 1 or not hmac.compare_digest(sent[0].strip().encode(), auth.proxy_secret.encode()):
            raise AccessError("this request did not come through the portal's sign-in proxy (its "
                              f"{auth.proxy_secret_header} is missing or wrong); open the portal through the "
                              "proxy's address")
    if auth.trusted_proxies:
        reason = _untrusted_address_reason(peer, pairs, settings, secret_ok=auth.proxy_secret is not None)
        if reason:
            raise AccessError(f"{reason}; open the portal through the proxy's address")
    values = _header_values(pairs, auth.header)
    if not values or not values[0].strip():
        raise AccessError(f"this request has no {auth.header} header; the portal is configured to trust "
                          "a reverse proxy for sign-in (auth.mode = \"header\"). Open it through the proxy, or "
                          "set auth.mode = \"local\" for a standalone portal")
    if len(values) > 1 or "," in values[0]:
        raise AccessError(f"this request names more than one user ({auth.header} appears {len(values)} time(s)"
                          f"{', with a comma-joined value' if ',' in values[0] else ''}); the proxy must replace "
                          "the header, never append to it")
    return check_user_name(values[0].strip())


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
    return name if USER_PATTERN.fullmatch(name) else "researcher"


def login_required(settings: Settings) -> bool:
    return settings.auth.mode == "local" and bool(settings.auth.local_users)


def check_login(name: str, password: str, settings: Settings, *, throttle: LoginThrottle | None = None,
                address: str | None = None, notes: list[str] | None = None) -> str:
    """Return the user name when the password matches its configured hash; AccessError otherwise.

    Every attempt costs the same hashing (:func:`portal.passwords.verify`). ``throttle`` (the
    portal's one :class:`LoginThrottle`) refuses without hashing while this name from this address,
    or this address, is locked out, and records the outcome. A good password against an older hash
    upgrades it in the settings file; when that cannot be done, ``notes`` gets why.
    """
    if throttle is not None:
        wait = throttle.retry_after(name, address)
        if wait > 0:
            raise AccessError(f"too many failed sign-ins; try again in {int(wait) + 1} s")
    ok = passwords.verify(name, password, settings)
    if throttle is not None:
        (throttle.succeeded if ok else throttle.failed)(name, address)
    if not ok:
        raise AccessError("unknown user or wrong password")
    checked = check_user_name(name)
    if passwords.needs_upgrade(name, settings):
        why = passwords.upgrade_stored_hash(name, password, settings)
        if why and notes is not None:
            notes.append(why)
    return checked


def session_expired(signed_in_at: float | None, settings: Settings, now: float | None = None) -> bool:
    """A local sign-in older than ``[auth] session_hours`` (or of unknown age) has expired."""
    if signed_in_at is None:
        return True
    return (time.time() if now is None else now) - signed_in_at > settings.auth.session_hours * 3600


@dataclass
class _Failures:
    count: int = 0
    first: float = 0.0
    locked_until: float = 0.0


class LoginThrottle:
    """Failed sign-ins per user name from one client address, and per address, in this process, in
    bounded memory.

    After ``max_failures`` failures within ``window_s`` the key (the name from that address, or the
    address) is locked
    for ``lockout_s``, doubling with each further failure up to ``max_lockout_s``. At most
    ``max_entries`` keys are kept (the least recently touched go first). Thread-safe: every
    Streamlit session of the process shares one.
    """

    def __init__(self, *, max_failures: int = 5, window_s: float = 900.0, lockout_s: float = 30.0,
                 max_lockout_s: float = 900.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures, self.window_s = max_failures, window_s
        self.lockout_s, self.max_lockout_s = lockout_s, max_lockout_s
        self.max_entries, self.clock = max_entries, clock
        self._entries: OrderedDict[str, _Failures] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _keys(name: str, address: str | None) -> list[str]:
        """The name from this address, and the address: a guesser elsewhere cannot lock a user out."""
        where = address or "local"
        return [f"user:{name[:100]}@{where}", f"address:{where}"]

    def __len__(self) -> int:
        return len(self._entries)

    def retry_after(self, name: str, address: str | None) -> float:
        """Seconds until ``name`` from ``address`` may try again (0: now)."""
        now = self.clock()
        with self._lock:
            entries = [self._entries.get(k) for k in self._keys(name, address)]
        return max([e.locked_until - now for e in entries if e is not None] + [0.0])

    def failed(self, name: str, address: str | None) -> None:
        now = self.clock()
        with self._lock:
            for key in self._keys(name, address):
                entry = self._entries.pop(key, None) or _Failures(first=now)
                if now - entry.first > self.window_s and entry.locked_until <= now:
                    entry = _Failures(first=now)
                entry.count += 1
                if entry.count >= self.max_failures:
                    extra = entry.count - self.max_failures
                    entry.locked_until = now + min(self.lockout_s * 2 ** min(extra, 30), self.max_lockout_s)
                self._entries[key] = entry
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def succeeded(self, name: str, address: str | None) -> None:
        """A good password clears the name's failures from that address (the address keeps its own)."""
        with self._lock:
            self._entries.pop(self._keys(name, address)[0], None)
