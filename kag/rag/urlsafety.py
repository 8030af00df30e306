"""URL validation and a bounded, SSRF-resistant HTTP fetch.

Rules applied to every URL, including each redirect target:

* only ``http`` and ``https``; no ``user:password@`` part; a host is required;
* the host is resolved with ``getaddrinfo`` (in a worker thread) and the URL is
  refused if *any* resolved address is loopback, private, link-local, multicast,
  reserved, unspecified, shared (100.64/10) or otherwise not globally routable,
  including IPv6 forms that embed such an IPv4 address (``::ffff:127.0.0.1``,
  6to4, Teredo). Numeric tricks (``http://2130706433/``, ``0x7f.1``, ``0177.0.0.1``)
  are caught because the check runs on the *resolved* address;
* ``allow_private_networks=True`` lifts the address check (for intranets and
  tests); ``allowed_hosts`` lifts it for exactly those host names.

The fetch connects to the address that was validated (the request goes to the IP
with the original ``Host`` header and TLS server name), so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect it.
Proxies from the environment are ignored for the same reason. Redirects are
followed by hand, each ``Location`` being validated before any traffic is sent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpx

from kag.errors import LoaderError, UnsafeURLError

#: ``resolver(host, port) -> addresses``; the default calls ``socket.getaddrinfo``.
Resolver = Callable[[str, int], Awaitable[list[str]]]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_USER_AGENT = "kag-loader/0.1"


@dataclass(frozen=True)
class ValidatedURL:
    """A URL that passed :func:`validate_url`, with the addresses its host resolved to."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[str, ...]


@dataclass
class FetchResult:
    """The body of a successful fetch (status 2xx) and where it finally came from."""

    url: str
    status_code: int
    content_type: str
    charset: str | None
    content: bytes
    redirects: list[str] = field(default_factory=list)


async def default_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the system resolver in a worker thread (IPs as strings)."""
    try:
        infos = await asyncio.to_thread(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise LoaderError(f"could not resolve host {host!r}: {exc}") from exc
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 scope id
        if addr not in out:
            out.append(addr)
    return out


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


_SPECIAL = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "100.64.0.0/10",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "240.0.0.0/4",
        "255.255.255.255/32",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
    )
)


def address_problem(address: str) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` if it is."""
    try:
        ip: IPAddress = ipaddress.ip_address(address)
    except ValueError:
        return f"{address!r} is not an IP address"
    checks = [
        # most specific reason first: 169.254/16 is also "private" to ipaddress
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("unspecified", ip.is_unspecified),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
        # older Pythons call some IANA special-purpose blocks global (e.g. 192.0.0.0/24)
        ("special-purpose", any(ip in net for net in _SPECIAL if net.version == ip.version)),
    ]
    if isinstance(ip, ipaddress.IPv6Address):
        checks.append(("site-local", ip.is_site_local))
    for what, bad in checks:
        if bad:
            return f"{ip} is {what}"
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in _embedded_ipv4(ip):
            problem = address_problem(str(inner))
            if problem:
                return f"{ip} embeds {problem}"
    return None


def _parse(url: str | httpx.URL) -> httpx.URL:
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise UnsafeURLError(f"refused URL {str(url)!r}: it is not a valid URL ({exc}).") from exc
    if parsed.scheme not in ("http", "https"):
        raise UnsafeURLError(f"refused URL {str(url)!r}: scheme {parsed.scheme!r} is not allowed; use http or https.")
    if parsed.userinfo:
        raise UnsafeURLError(
            f"refused URL with credentials ({parsed.scheme}://{parsed.host}/...): "
            "user:password@ in URLs is not allowed; pass credentials another way."
        )
    if not parsed.host:
        raise UnsafeURLError(f"refused URL {str(url)!r}: it has no host.")
    return parsed


async def validate_url(
    url: str | httpx.URL,
    allow_private_networks: bool = False,
    *,
    allowed_hosts: Collection[str] = (),
    resolver: Resolver | None = None,
) -> ValidatedURL:
    """Check ``url`` against the rules in this module's docstring.

    Raises :class:`~kag.errors.UnsafeURLError` when the URL is refused and
    :class:`~kag.errors.LoaderError` when its host cannot be resolved. Nothing is
    sent to the host; only DNS is consulted.
    """
    parsed = _parse(url)
    host = parsed.raw_host.decode("ascii")  # IDNA form, as DNS and TLS see it
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    addresses = await (resolver or default_resolver)(host, port)
    if not addresses:
        raise LoaderError(f"could not resolve host {host!r}: no addresses.")
    exempt = (
        allow_private_networks
        or host.lower() in {h.lower() for h in allowed_hosts}
        or parsed.host.lower() in {h.lower() for h in allowed_hosts}
    )
    for address in addresses:
        try:
            ipaddress.ip_address(address)
        except ValueError as exc:
            raise UnsafeURLError(f"refused URL for host {host!r}: resolver returned {address!r}, not an IP.") from exc
        if exempt:
            continue
        problem = address_problem(address)
        if problem:
            raise UnsafeURLError(
                f"refused URL for host {host!r}: it resolves to {problem}. Private and local "
                "addresses are blocked to prevent server-side request forgery; pass "
                "allow_private_networks=True (or allowed_hosts) if this host is trusted."
            )
    return ValidatedURL(url=parsed, host=host, port=port, addresses=tuple(addresses))


def _pinned_request(client: httpx.AsyncClient, target: ValidatedURL, address: str) -> httpx.Request:
    """A GET to ``address`` carrying the original Host header and TLS server name."""
    url = target.url
    # ASCII (IDNA) forms: the Host header and TLS server name must be what DNS saw
    host_header = url.netloc.decode("ascii")
    extensions = {"sni_hostname": target.host} if url.scheme == "https" else {}
    return client.build_request(
        "GET",
        url.copy_with(host=address),
        headers={"Host": host_header, "User-Agent": _USER_AGENT, "Accept": "*/*"},
        extensions=extensions,
    )


def _content_type(headers: httpx.Headers) -> tuple[str, str | None]:
    raw = headers.get("content-type", "")
    parts = [p.strip() for p in raw.split(";")]
    mime = parts[0].lower() if parts and parts[0] else "application/octet-stream"
    charset = None
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return mime, charset


async def _read_limited(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise LoaderError(f"{url} is too large: Content-Length {int(declared)} exceeds max_bytes={max_bytes}.")
    buf = bytearray()
    # counts decoded bytes, so a small gzip body cannot expand past the limit either
    async for piece in response.aiter_bytes():
        buf += piece
        if len(buf) > max_bytes:
            raise LoaderError(f"{url} is too large: body exceeds max_bytes={max_bytes}.")
    return bytes(buf)


async def fetch_url(
    url: str,
    *,
    max_bytes: int = 10_000_000,
    timeout: float = 20.0,
    allow_private_networks: bool = False,
    max_redirects: int = 5,
    allowed_hosts: Collection[str] = (),
    resolver: Resolver | None = None,
) -> FetchResult:
    """GET ``url`` safely: validated hops, manual redirects, size and time limits.

    ``timeout`` bounds the whole fetch (all hops, slow bodies included). Raises
    :class:`~kag.errors.UnsafeURLError` for refused URLs and
    :class:`~kag.errors.LoaderError` for HTTP errors, oversize bodies, too many
    redirects and timeouts.
    """
    if max_bytes < 1 or max_redirects < 0 or timeout <= 0:
        raise LoaderError("fetch_url needs max_bytes >= 1, max_redirects >= 0 and timeout > 0.")
    redirects: list[str] = []
    current = url
    try:
        async with asyncio.timeout(timeout):
            async with httpx.AsyncClient(
                follow_redirects=False, trust_env=False, timeout=httpx.Timeout(timeout)
            ) as client:
                while True:
                    target = await validate_url(
                        current,
                        allow_private_networks,
                        allowed_hosts=allowed_hosts,
                        resolver=resolver,
                    )
                    response = await _send_pinned(client, target, current, max_bytes)
                    if isinstance(response, str):  # a redirect Location
                        if len(redirects) >= max_redirects:
                            raise LoaderError(
                                f"{url}: too many redirects (more than max_redirects="
                                f"{max_redirects}); last hop {current}."
                            )
                        redirects.append(current)
                        current = response
                        continue
                    response.redirects = redirects
                    return response
    except TimeoutError as exc:
        raise LoaderError(f"{url}: timed out after {timeout:g} s.") from exc


async def _send_pinned(
    client: httpx.AsyncClient, target: ValidatedURL, current: str, max_bytes: int
) -> FetchResult | str:
    """Send one hop; return the absolute redirect target or the final result."""
    last_error: Exception | None = None
    for address in target.addresses:
        request = _pinned_request(client, target, address)
        try:
            response = await client.send(request, stream=True)
        except httpx.ConnectError as exc:  # try the host's next address
            last_error = exc
            continue
        except httpx.TimeoutException as exc:
            raise LoaderError(f"{current}: timed out ({type(exc).__name__}).") from exc
        except httpx.HTTPError as exc:
            raise LoaderError(f"{current}: request failed: {exc}") from exc
        try:
            if response.status_code in _REDIRECT_STATUSES:
                location = response.headers.get("location")
                if not location:
                    raise LoaderError(f"{current}: redirect status {response.status_code} without Location.")
                return urljoin(current, location)
            if not 200 <= response.status_code < 300:
                raise LoaderError(f"{current}: HTTP {response.status_code} {response.reason_phrase}.")
            mime, charset = _content_type(response.headers)
            body = await _read_limited(response, current, max_bytes)
            return FetchResult(
                url=current,
                status_code=response.status_code,
                content_type=mime,
                charset=charset,
                content=body,
            )
        except httpx.TimeoutException as exc:
            raise LoaderError(f"{current}: timed out reading the body.") from exc
        except httpx.HTTPError as exc:
            raise LoaderError(f"{current}: reading the body failed: {exc}") from exc
        finally:
            await response.aclose()
    raise LoaderError(f"{current}: could not connect to {target.host}: {last_error}")
