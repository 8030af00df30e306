"""Namespaces (tenants) of one server: which namespace a request may use, and its service.

Every request runs against exactly one namespace, decided here and never by a request body
(the bodies refuse unknown fields):

* a key bound to a namespace (``KEY:SCOPES@acme``) uses that namespace; an
  ``X-Kag-Namespace`` header naming another one is **403**;
* an unbound ``admin`` key, or any caller of a server without keys (loopback only), uses
  the namespace the ``X-Kag-Namespace`` header names, else the server's default one
  (``default``, or ``kag serve --namespace``);
* any other unbound key uses the server's default namespace (a header naming another
  one is **403**).

A namespace's :class:`~kag.server.service.Service` is opened on first use over the same
backend (:meth:`Service.in_namespace`) and kept; at most ``max_namespaces`` are open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kag._sync import LoopLock
from kag.errors import ConfigError, HTTPError
from kag.server.auth import APIKey
from kag.server.mcp import MCPServer
from kag.server.service import Service
from kag.validation import check_namespace

__all__ = ["NAMESPACE_HEADER", "Tenant", "Tenants", "request_namespace"]

NAMESPACE_HEADER = "x-kag-namespace"


@dataclass(frozen=True)
class Tenant:
    """One namespace's service and its MCP endpoint."""

    namespace: str
    service: Service
    mcp: MCPServer | None


def request_namespace(header: str, key: APIKey | None, *, authenticated: bool, default: str = "default") -> str:
    """The namespace a request uses (see the module docstring); raises **400**/**403** ``HTTPError``.

    ``header`` is the ``X-Kag-Namespace`` value ("" when absent); ``authenticated`` says the
    server checks keys (``key`` is then the caller's, ``None`` on an open route without one).
    """
    wanted: str | None = None
    if header.strip():
        try:
            wanted = check_namespace(header.strip(), error=ConfigError)
        except ConfigError as exc:
            raise HTTPError(400, "InvalidNamespace", f"X-Kag-Namespace: {exc}") from None
    if not authenticated:
        return wanted or default
    if key is None:  # an open route (/health) without a key: it shows no tenant's data
        return default
    if key.namespace is not None:
        if wanted is not None and wanted != key.namespace:
            raise HTTPError(403, "Forbidden", "this API key is bound to another namespace")
        return key.namespace
    if wanted is not None and wanted != default and "admin" not in key.scopes:
        raise HTTPError(403, "Forbidden", "only an admin key or a key bound to it may use another namespace")
    return wanted or default


class Tenants:
    """The open namespaces of a server, each opened on first use from the default one."""

    def __init__(
        self,
        default: Service,
        *,
        mcp: bool = True,
        max_namespaces: int = 64,
        on_open: Callable[[Service], None] | None = None,
    ) -> None:
        if max_namespaces < 1:
            raise ConfigError("max_namespaces must be >= 1.")
        self.default = default
        self.max_namespaces = max_namespaces
        self._mcp = mcp
        self._on_open = on_open
        self._open: dict[str, Tenant] = {}
        self._lock = LoopLock()
        self._open[default.namespace] = self._tenant(default)

    def _tenant(self, service: Service) -> Tenant:
        if self._on_open is not None:
            self._on_open(service)
        return Tenant(service.namespace, service, MCPServer(service) if self._mcp else None)

    @property
    def namespaces(self) -> list[str]:
        """The namespaces opened so far."""
        return sorted(self._open)

    async def get(self, namespace: str) -> Tenant:
        """The tenant of ``namespace``, opened now if needed (**503** beyond ``max_namespaces``)."""
        found = self._open.get(namespace)
        if found is not None:
            return found
        async with self._lock:
            found = self._open.get(namespace)
            if found is not None:
                return found
            if len(self._open) >= self.max_namespaces:
                raise HTTPError(
                    503,
                    "TooManyNamespaces",
                    f"this server serves at most {self.max_namespaces} namespaces (kag serve --max-namespaces)",
                )
            tenant = self._tenant(self.default.in_namespace(namespace))
            self._open[namespace] = tenant
            return tenant

    async def aclose(self) -> None:
        """Close every namespace's service, the default one last (the others may share its driver)."""
        for namespace, tenant in list(self._open.items()):
            if tenant.service is not self.default:
                await tenant.service.aclose()
            del self._open[namespace]
        await self.default.aclose()
