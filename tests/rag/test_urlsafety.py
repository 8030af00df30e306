"""URL validation and the bounded fetch, against real servers on 127.0.0.1 only.

Refusals never send traffic: validation happens before any connection, and the
redirect tests check the local server's request log to prove it.
"""

from __future__ import annotations

import pytest

from kag.errors import LoaderError, UnsafeURLError
from kag.rag.urlsafety import address_problem, default_resolver, fetch_url, validate_url
from tests.helpers.http_server import LocalHTTPServer, Reply
from tests.rag.conftest import StreamingServer


class RecordingResolver:
    """Resolves from a fixed table and records every lookup (no real DNS)."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host not in self.table:
            raise LoaderError(f"could not resolve host {host!r}")
        return self.table[host]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost:8080/x",
        "http://10.0.0.1/",
        "http://192.168.1.20/",
        "http://172.16.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
        "http://2130706433/",  # 127.0.0.1 as one decimal number
        "http://0x7f.1/",  # hex + short form
        "http://0177.0.0.1/",  # octal
        "http://100.64.0.1/",  # shared address space (carrier NAT)
        "http://224.0.0.1/",  # multicast
        "http://240.0.0.1/",  # reserved
    ],
)
async def test_private_and_special_addresses_are_refused(url: str) -> None:
    with pytest.raises(UnsafeURLError, match="refused"):
        await validate_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://127.0.0.1:70/",
        "http://user:secret@example.com/",
        "http://:pw@example.com/",
        "http:///nohost",
    ],
)
async def test_bad_schemes_credentials_and_missing_hosts(url: str) -> None:
    resolver = RecordingResolver({"example.com": ["93.184.216.34"]})
    with pytest.raises(UnsafeURLError) as info:
        await validate_url(url, resolver=resolver)
    assert "secret" not in str(info.value)
    assert resolver.calls == []  # refused before any lookup


async def test_public_address_passes_and_any_bad_address_fails() -> None:
    ok = RecordingResolver({"example.com": ["93.184.216.34", "2606:2800:220:1::1"]})
    checked = await validate_url("https://example.com/page", resolver=ok)
    assert checked.host == "example.com" and checked.port == 443
    assert checked.addresses == ("93.184.216.34", "2606:2800:220:1::1")
    # one private address among public ones is enough to refuse (DNS can't launder it)
    mixed = RecordingResolver({"example.com": ["93.184.216.34", "10.1.2.3"]})
    with pytest.raises(UnsafeURLError, match="private"):
        await validate_url("https://example.com/", resolver=mixed)


async def test_allow_private_networks_and_allowed_hosts() -> None:
    await validate_url("http://127.0.0.1:9/", allow_private_networks=True)
    await validate_url("http://127.0.0.1:9/", allowed_hosts={"127.0.0.1"})
    with pytest.raises(UnsafeURLError):
        await validate_url("http://localhost:9/", allowed_hosts={"127.0.0.1"})


def test_address_problem_names_the_reason() -> None:
    assert address_problem("8.8.8.8") is None
    assert "loopback" in (address_problem("127.0.0.2") or "")
    assert "link-local" in (address_problem("169.254.169.254") or "")
    assert address_problem("::ffff:10.0.0.1") is not None
    assert address_problem("2002:7f00:1::1") is not None  # 6to4 wrapping 127.0.0.1
    assert address_problem("not-an-ip") is not None


async def test_unresolvable_host_is_a_loader_error() -> None:
    with pytest.raises(LoaderError, match="resolve"):
        await default_resolver("no-such-host.invalid", 80)


async def test_fetch_body_and_content_type(server: LocalHTTPServer) -> None:
    server.route(
        "GET", "/page", lambda r: Reply(body="<h1>Hi</h1>", headers={"Content-Type": "text/html; charset=ISO-8859-1"})
    )
    result = await fetch_url(server.url + "/page", allow_private_networks=True)
    assert result.content == b"<h1>Hi</h1>"
    assert (result.content_type, result.charset, result.status_code) == ("text/html", "ISO-8859-1", 200)
    assert server.requests[0].headers["host"] == f"127.0.0.1:{server.port}"


async def test_fetch_is_pinned_to_the_validated_address(server: LocalHTTPServer) -> None:
    # "docs.test" exists only in our resolver: the request can only arrive if httpx
    # connects to the validated IP instead of resolving the name again
    server.route("GET", "/doc", lambda r: "pinned")
    resolver = RecordingResolver({"docs.test": ["127.0.0.1"]})
    result = await fetch_url(f"http://docs.test:{server.port}/doc", allowed_hosts={"docs.test"}, resolver=resolver)
    assert result.content == b"pinned"
    assert server.requests[0].headers["host"] == f"docs.test:{server.port}"


async def test_relative_redirects_are_followed(server: LocalHTTPServer) -> None:
    server.route("GET", "/a", lambda r: Reply(status=301, headers={"Location": "/b"}))
    server.route("GET", "/b", lambda r: Reply(status=307, headers={"Location": "c"}))
    server.route("GET", "/c", lambda r: "done")
    result = await fetch_url(server.url + "/a", allow_private_networks=True)
    assert result.content == b"done"
    assert result.url == server.url + "/c"
    assert result.redirects == [server.url + "/a", server.url + "/b"]


async def test_redirect_to_metadata_address_is_refused_without_traffic(
    server: LocalHTTPServer,
) -> None:
    server.route(
        "GET", "/start", lambda r: Reply(status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
    )
    with pytest.raises(UnsafeURLError, match=r"169\.254\.169\.254"):
        # first hop allowed by name only; the redirect target gets the default checks
        await fetch_url(server.url + "/start", allowed_hosts={"127.0.0.1"})
    assert [r.path for r in server.requests] == ["/start"]


async def test_redirect_to_loopback_name_and_file_scheme_are_refused(
    server: LocalHTTPServer,
) -> None:
    server.route(
        "GET",
        "/to-localhost",
        lambda r: Reply(status=302, headers={"Location": f"http://localhost:{server.port}/secret"}),
    )
    server.route("GET", "/to-file", lambda r: Reply(status=302, headers={"Location": "file:///etc/passwd"}))
    server.route("GET", "/secret", lambda r: "secret")
    with pytest.raises(UnsafeURLError):
        await fetch_url(server.url + "/to-localhost", allowed_hosts={"127.0.0.1"})
    with pytest.raises(UnsafeURLError, match="scheme"):
        await fetch_url(server.url + "/to-file", allowed_hosts={"127.0.0.1"})
    assert "/secret" not in [r.path for r in server.requests]


async def test_too_many_redirects(server: LocalHTTPServer) -> None:
    server.route("GET", "/loop", lambda r: Reply(status=302, headers={"Location": "/loop"}))
    with pytest.raises(LoaderError, match="too many redirects"):
        await fetch_url(server.url + "/loop", allow_private_networks=True, max_redirects=3)
    assert len(server.requests) == 4  # the first request plus 3 redirects


async def test_http_errors(server: LocalHTTPServer) -> None:
    server.route("GET", "/gone", lambda r: 410)
    with pytest.raises(LoaderError, match="HTTP 410"):
        await fetch_url(server.url + "/gone", allow_private_networks=True)
    with pytest.raises(LoaderError, match="HTTP 404"):
        await fetch_url(server.url + "/missing", allow_private_networks=True)


async def test_declared_length_over_limit(streaming_server: StreamingServer) -> None:
    with pytest.raises(LoaderError, match="Content-Length"):
        await fetch_url(streaming_server.url + "/lying-length", allow_private_networks=True)


async def test_streamed_body_stops_at_max_bytes(streaming_server: StreamingServer) -> None:
    with pytest.raises(LoaderError, match="max_bytes=100000"):
        await fetch_url(streaming_server.url + "/infinite", allow_private_networks=True, max_bytes=100_000)


async def test_decompressed_size_is_what_counts(streaming_server: StreamingServer) -> None:
    # ~20 kB of gzip that inflates to 20 MB: refused although the wire size is small
    with pytest.raises(LoaderError, match="too large"):
        await fetch_url(streaming_server.url + "/gzip-bomb", allow_private_networks=True, max_bytes=1_000_000)


async def test_total_timeout_bounds_slow_bodies(streaming_server: StreamingServer) -> None:
    with pytest.raises(LoaderError, match="timed out"):
        await fetch_url(streaming_server.url + "/drip", allow_private_networks=True, timeout=0.5)


async def test_connection_refused_is_a_loader_error() -> None:
    import socket

    with socket.socket() as s:  # a port that is certainly closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LoaderError, match="could not connect"):
        await fetch_url(f"http://127.0.0.1:{port}/", allow_private_networks=True)


async def test_idn_host_is_sent_in_ascii_form(server: LocalHTTPServer) -> None:
    server.route("GET", "/idn", lambda r: "ok")
    resolver = RecordingResolver({"xn--bcher-kva.test": ["127.0.0.1"]})
    result = await fetch_url(f"http://bücher.test:{server.port}/idn", allowed_hosts={"bücher.test"}, resolver=resolver)
    assert result.content == b"ok"
    assert resolver.calls == ["xn--bcher-kva.test"]
    assert server.requests[0].headers["host"] == f"xn--bcher-kva.test:{server.port}"
