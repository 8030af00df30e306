"""SSRF refusals of the URL loader, with a guard that fails any connection off loopback.

Every socket ``connect`` in this module is checked: only 127.0.0.1 / ::1 may
be reached (the local test server). Hosts are either numeric (resolved without
DNS traffic) or resolved by a fixed table, so no packet leaves the machine.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.errors import LoaderError, UnsafeURLError
from kag.rag.loaders import AutoLoader
from kag.rag.urlsafety import address_problem, fetch_url, validate_url
from tests.helpers.http_server import LocalHTTPServer, Reply

BLOCKED_V4 = [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254",
    "192.168.0.1", "169.254.169.254", "169.254.0.1", "0.0.0.0", "100.64.0.1", "100.127.255.254",
    "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", "198.18.0.1", "192.0.2.1",
]  # fmt: skip


class ConnectionGuard:
    """Replaces ``socket.socket.connect``/``connect_ex``; records and refuses non-loopback targets."""

    def __init__(self) -> None:
        self.refused: list[Any] = []
        self.allowed: list[Any] = []

    def check(self, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        try:
            loopback = ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            self.refused.append(address)
            raise AssertionError(f"test tried to connect to non-loopback address {address!r}")
        self.allowed.append(address)


@pytest.fixture(autouse=True)
def guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectionGuard]:
    g = ConnectionGuard()
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            g.check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            g.check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield g
    assert not g.refused, g.refused


@pytest.fixture
def server() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as s:
        yield s


def encodings(ip: str) -> list[str]:
    """Ways to write an IPv4 address in a URL host that resolve to it without DNS."""
    addr = ipaddress.IPv4Address(ip)
    n = int(addr)
    a, b, c, d = addr.packed
    hi, lo = f"{(a << 8) | b:x}", f"{(c << 8) | d:x}"
    forms = [ip, str(n), hex(n), f"0{a:o}.0{b:o}.0{c:o}.0{d:o}", f"{a}.{(b << 16) | (c << 8) | d}",
             f"[::ffff:{ip}]", f"[::ffff:{hi}:{lo}]", f"[2002:{hi}:{lo}::]"]  # fmt: skip
    if a == 127:
        forms += [f"{a}.{d}", "[::1]"]
    return forms


class Table:
    """A resolver from a fixed table (no DNS); unknown names fail like a missing host."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    async def __call__(self, host: str, port: int) -> list[str]:
        if host in self.table:
            return self.table[host]
        try:  # numeric hosts, as getaddrinfo would read them (inet_aton: no DNS involved)
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            pass
        try:
            return [str(ipaddress.IPv4Address(socket.inet_aton(host)))]
        except OSError:
            raise LoaderError(f"could not resolve host {host!r}") from None


@pytest.mark.parametrize("url", [f"http://{h}:8080/x" for ip in BLOCKED_V4 for h in encodings(ip)])
async def test_numeric_encodings_of_blocked_addresses_are_refused(url: str) -> None:
    with pytest.raises(UnsafeURLError):
        await validate_url(url)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    address=st.one_of(
        st.ip_addresses(network="10.0.0.0/8"),
        st.ip_addresses(network="172.16.0.0/12"),
        st.ip_addresses(network="192.168.0.0/16"),
        st.ip_addresses(network="127.0.0.0/8"),
        st.ip_addresses(network="169.254.0.0/16"),
        st.ip_addresses(network="100.64.0.0/10"),
        st.ip_addresses(network="fc00::/7"),
        st.ip_addresses(network="fe80::/10"),
        st.ip_addresses(network="::ffff:0:0/96"),
    ),
    name=st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\.(example|internal|corp)\Z"),
)
async def test_names_resolving_to_blocked_addresses_are_refused(address: Any, name: str, guard: Any) -> None:
    resolver = Table({name: ["93.184.215.14", str(address)]})  # one bad answer among good ones is enough
    with pytest.raises(UnsafeURLError):
        await validate_url(f"https://{name}/", resolver=resolver)
    assert address_problem(str(address)) is not None


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/latest/meta-data/",  # 169.254.169.254 as one number
        "http://[::ffff:a9fe:a9fe]/",
        "http://0xa9fea9fe/",
        "http://10.0.0.1/",
        "http://metadata.internal/",  # resolves to link-local in the table
        "http://intranet.corp/",  # one private answer among public ones
        "http://[fd00::1]/",
        "http://0/",
        "gopher://127.0.0.1:6379/_FLUSHALL",
        "file:///etc/passwd",
        "http://user:pw@public.example/",
    ],
)
async def test_redirects_to_blocked_targets_are_refused_before_any_traffic(
    server: LocalHTTPServer, guard: ConnectionGuard, target: str
) -> None:
    server.route("GET", "/start", lambda r: Reply(status=302, headers={"Location": target}))
    resolver = Table(
        {
            "127.0.0.1": ["127.0.0.1"],
            "metadata.internal": ["169.254.169.254"],
            "intranet.corp": ["93.184.215.14", "192.168.10.10"],
            "public.example": ["93.184.215.14"],
        }
    )
    with pytest.raises(UnsafeURLError):
        await fetch_url(server.url + "/start", allowed_hosts={"127.0.0.1"}, resolver=resolver)
    assert [r.path for r in server.requests] == ["/start"]
    assert all(addr[0] == "127.0.0.1" for addr in guard.allowed)


async def test_redirect_chain_refused_at_the_first_bad_hop(server: LocalHTTPServer) -> None:
    server.route("GET", "/a", lambda r: Reply(status=301, headers={"Location": "/b"}))
    server.route("GET", "/b", lambda r: Reply(status=307, headers={"Location": "http://0x7f000001:1/c"}))
    with pytest.raises(UnsafeURLError):
        await fetch_url(server.url + "/a", allowed_hosts={"127.0.0.1"}, resolver=Table({"127.0.0.1": ["127.0.0.1"]}))
    assert [r.path for r in server.requests] == ["/a", "/b"]


async def test_loader_refuses_loopback_private_and_link_local_by_default(server: LocalHTTPServer) -> None:
    server.route("GET", "/secret", lambda r: "secret")
    loader = AutoLoader()
    for url in (
        server.url + "/secret",
        f"http://localhost:{server.port}/secret",
        f"http://[::1]:{server.port}/secret",
        f"http://2130706433:{server.port}/secret",
        "http://169.254.169.254/latest/meta-data/",
        "http://192.168.1.1/",
    ):
        with pytest.raises(UnsafeURLError):
            await loader.load(url)
    report = await loader.load_with_report([server.url + "/secret", "http://10.1.2.3/"])
    assert report.documents == [] and len(report.errors) == 2
    assert server.requests == []  # nothing was sent, not even to loopback


async def test_loader_pins_the_validated_address(server: LocalHTTPServer) -> None:
    # a name that resolves to loopback is allowed only by name, and the request goes to that address
    server.route("GET", "/doc", lambda r: Reply(body="hello", headers={"Content-Type": "text/plain"}))
    loader = AutoLoader(allowed_hosts={"docs.test"}, resolver=Table({"docs.test": ["127.0.0.1"]}))
    docs = await loader.load(f"http://docs.test:{server.port}/doc")
    assert [d.text for d in docs] == ["hello"]
    assert server.requests[0].headers["host"] == f"docs.test:{server.port}"


def test_the_guard_itself_stops_non_loopback_connections(guard: ConnectionGuard) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(AssertionError, match="non-loopback"):
            sock.connect(("192.0.2.1", 9))  # TEST-NET-1; refused before any packet is sent
    finally:
        sock.close()
    assert guard.refused == [("192.0.2.1", 9)]
    guard.refused.clear()
