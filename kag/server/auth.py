"""API keys for the HTTP API and MCP over HTTP: ``Authorization: Bearer <key>`` with scopes.

Keys come from ``$KAG_API_KEYS`` or a file (``kag serve --api-keys FILE``). Both hold
entries ``KEY:SCOPES`` separated by whitespace or newlines (``#`` starts a comment in
a file); ``SCOPES`` is a comma-separated subset of ``read``, ``ingest``, ``admin``::

    # kag API keys
    Zq3v9cR1...Vw:read
    sha256:6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b:read,ingest

An entry may end in ``@NAMESPACE`` (``KEY:read,ingest@acme``): the key is bound to that
namespace (tenant) and every request made with it reads and writes only there, whatever
the request says. A key without one uses the ``default`` namespace, and an ``admin`` key
without one may pick any namespace with the ``X-Kag-Namespace`` header.

``KEY`` is the key itself (token68 characters, at least :data:`MIN_KEY_LENGTH` of them;
make one with ``python -c 'import secrets; print(secrets.token_urlsafe(32))'``) or
``sha256:<hex digest of the key>``, so a key file need not hold the secret. Only
sha256 digests are kept in memory; a presented key is hashed and compared with every
stored digest by :func:`hmac.compare_digest` (no early exit).

Scopes: ``read`` (``GET /``, ``/schema``, ``/search``, ``/triplet_search``, ``/ask``,
``/mcp``), ``ingest`` (``/ingest``), ``admin`` (``/metrics``; it also grants every
other scope). ``GET /health`` stays open. Without a key: **401** with
``WWW-Authenticate: Bearer``; with a key lacking the route's scope: **403**.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kag.errors import APIKeysError, ConfigError, HTTPError, InsecureBindError
from kag.validation import check_namespace

__all__ = [
    "API_KEYS_ENV",
    "MIN_KEY_LENGTH",
    "OPEN_ROUTES",
    "ROUTE_SCOPES",
    "SCOPES",
    "APIKey",
    "APIKeys",
    "check_bind",
    "hash_key",
    "is_loopback",
]

API_KEYS_ENV = "KAG_API_KEYS"
SCOPES: tuple[str, ...] = ("read", "ingest", "admin")
MIN_KEY_LENGTH = 16
ROUTE_SCOPES: dict[str, str] = {
    "/": "read",
    "/schema": "read",
    "/search": "read",
    "/triplet_search": "read",
    "/ask": "read",
    "/mcp": "read",
    "/ingest": "ingest",
    "/delete": "ingest",
    "/metrics": "admin",
}
"""The scope each route needs; a route not listed here (and not open) needs ``admin``."""
OPEN_ROUTES = frozenset({"/health"})

_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_REALM = 'Bearer realm="kag"'
_GENERATE = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def hash_key(key: str) -> str:
    """The ``sha256:<hex>`` form of ``key`` (what a key file may hold instead of the key)."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class APIKey:
    """One key, as its sha256 digest, and its scopes."""

    digest: bytes
    scopes: frozenset[str]
    namespace: str | None = None
    """The namespace the key is bound to (``None``: not bound)."""

    @property
    def key_id(self) -> str:
        """The first 8 hex digits of the digest: names the key in logs without revealing it."""
        return self.digest.hex()[:8]

    def allows(self, scope: str) -> bool:
        """True when the key has ``scope`` (``admin`` has every scope)."""
        return scope in self.scopes or "admin" in self.scopes


class APIKeys:
    """A set of API keys (digests and scopes) and the check of a request's ``Authorization`` header."""

    def __init__(self, keys: Iterable[APIKey]) -> None:
        self.keys: tuple[APIKey, ...] = tuple(keys)
        if not self.keys:
            raise APIKeysError("the API key list is empty; give at least one KEY:SCOPES entry.")
        if len({k.digest for k in self.keys}) != len(self.keys):
            raise APIKeysError("the API key list names the same key twice; give each key once with all its scopes.")

    def __len__(self) -> int:
        return len(self.keys)

    # -- reading --------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, where: str = API_KEYS_ENV) -> APIKeys:
        """Keys from ``KEY:SCOPES`` entries separated by whitespace (``#`` comments to the end of a line).

        Raises:
            APIKeysError: an entry is malformed, a key too short, a scope unknown, or no entry at all.
        """
        keys: list[APIKey] = []
        for number, line in enumerate(text.splitlines(), 1):
            for entry in line.split("#", 1)[0].split():
                keys.append(_parse_entry(entry, f"{where} (line {number})"))
        if not keys:
            raise APIKeysError(f"{where} holds no API key; give KEY:SCOPES entries ({_GENERATE}).")
        return cls(keys)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> APIKeys:
        """Keys from a file (see :meth:`parse`)."""
        file = Path(path).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise APIKeysError(f"--api-keys {file}: cannot read the key file ({exc}).") from None
        return cls.parse(text, f"--api-keys {file}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> APIKeys | None:
        """Keys from ``$KAG_API_KEYS`` (``None`` when it is unset or blank)."""
        text = (os.environ if environ is None else environ).get(API_KEYS_ENV, "")
        return cls.parse(text, API_KEYS_ENV) if text.strip() else None

    # -- checking -------------------------------------------------------------
    def authenticate(self, token: str) -> APIKey | None:
        """The key ``token`` is, else ``None`` (hashed, then compared with every digest in constant time)."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: APIKey | None = None
        for key in self.keys:  # no early exit: the time does not depend on which key matched
            if hmac.compare_digest(digest, key.digest):
                found = key
        return found

    def identify(self, authorization: str) -> APIKey | None:
        """The key an ``Authorization: Bearer <key>`` header value carries, else ``None``."""
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not _TOKEN68.fullmatch(token):
            return None
        return self.authenticate(token)

    def require(self, key: APIKey | None, route: str | None, *, sent: bool) -> None:
        """Check that ``key`` may use ``route`` (``sent``: an ``Authorization`` header was given).

        ``route=None`` (a path that is no route) only needs a valid key, so that strangers
        get **401** everywhere and key holders see the **404**. Open routes need nothing.

        Raises:
            HTTPError: **401** (no or unknown key, ``WWW-Authenticate: Bearer``) or **403**
                (the key lacks the route's scope).
        """
        if route in OPEN_ROUTES:
            return
        if key is None:
            if not sent:
                raise HTTPError(
                    401,
                    "Unauthorized",
                    "this route needs an API key: send 'Authorization: Bearer <key>'",
                    {"WWW-Authenticate": _REALM},
                )
            raise HTTPError(
                401,
                "Unauthorized",
                "the API key is not valid (send 'Authorization: Bearer <key>')",
                {"WWW-Authenticate": f'{_REALM}, error="invalid_token"'},
            )
        if route is None:
            return
        scope = ROUTE_SCOPES.get(route, "admin")
        if not key.allows(scope):
            raise HTTPError(
                403,
                "Forbidden",
                f"this API key lacks the {scope!r} scope that {route} needs",
                {"WWW-Authenticate": f'{_REALM}, error="insufficient_scope", scope="{scope}"'},
            )

    def authorize(self, authorization: str, route: str | None) -> APIKey | None:
        """:meth:`identify` then :meth:`require`: the caller's key (``None`` on an open route without one)."""
        key = self.identify(authorization)
        self.require(key, route, sent=bool(authorization.strip()))
        return key


def _parse_entry(entry: str, where: str) -> APIKey:
    secret, sep, scope_text = entry.rpartition(":")
    if not sep or not secret:
        raise APIKeysError(f"{where}: an entry must be KEY:SCOPES (e.g. KEY:read,ingest), got one without scopes.")
    scope_text, at, namespace = scope_text.partition("@")
    bound: str | None = None
    if at:
        try:
            bound = check_namespace(namespace, error=ConfigError)
        except ConfigError as exc:
            raise APIKeysError(f"{where}: {exc}") from None
    scopes = [s for s in scope_text.split(",") if s]
    unknown = sorted(set(scopes) - set(SCOPES))
    if not scopes or unknown:
        raise APIKeysError(f"{where}: unknown or missing scope(s) {unknown}; use a comma list of {', '.join(SCOPES)}.")
    algorithm, colon, digest = secret.partition(":")
    if colon:
        if algorithm != "sha256" or not _DIGEST.fullmatch(digest):
            raise APIKeysError(f"{where}: a hashed key must be sha256:<64 hex digits>.")
        return APIKey(bytes.fromhex(digest), frozenset(scopes), bound)
    if not _TOKEN68.fullmatch(secret):  # the entry is never echoed: it may be a secret
        raise APIKeysError(f"{where}: a key may only hold the characters A-Z a-z 0-9 . _ ~ + / - (then =).")
    if len(secret) < MIN_KEY_LENGTH:
        raise APIKeysError(f"{where}: a key must have at least {MIN_KEY_LENGTH} characters; {_GENERATE}.")
    return APIKey(hashlib.sha256(secret.encode("utf-8")).digest(), frozenset(scopes), bound)


# --------------------------------------------------------------------------- binding


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``127.0.0.0/8`` and ``::1`` (an empty host binds every interface)."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: APIKeys | None, *, insecure_no_auth: bool = False) -> str | None:
    """Check that serving on ``host`` is safe; return a warning to print, if any.

    Raises:
        InsecureBindError: ``host`` is not loopback, no key is configured and ``insecure_no_auth`` is false.
    """
    if keys is not None:
        if insecure_no_auth:
            raise InsecureBindError("--insecure-no-auth contradicts the configured API keys; drop one of them.")
        return None
    if is_loopback(host):
        return None
    if not insecure_no_auth:
        raise InsecureBindError(
            f"refusing to serve on {host!r} without API keys: anyone who can reach it could read and write the "
            f"knowledge base. Set {API_KEYS_ENV} or --api-keys FILE (entries KEY:SCOPES), bind 127.0.0.1, or "
            "pass --insecure-no-auth to accept the risk."
        )
    return (
        f"WARNING: serving on {host!r} WITHOUT authentication (--insecure-no-auth): anyone who can reach this "
        "address can read and change the knowledge base."
    )
