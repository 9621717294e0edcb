"""The sandbox's egress proxy and bridge: allowlist, address checks, limits, bwrap end to end.

The "internet" is a tiny HTTP server on 127.0.0.1; names resolve through FakeResolver, so no
test touches DNS or the network (allow_private=True wherever the target is that local server).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import stat
from pathlib import Path

import pytest
from netproxy_support import (
    FAST,
    FakeResolver,
    Origin,
    exchange,
    local_proxy,
)

from orchestrator.sandbox.netproxy import (
    EgressProxy,
    HostPolicy,
    NetworkPolicyError,
    ProxyLimits,
    is_public,
    normalize_host,
    parse_request,
)

# --- pure parts ---------------------------------------------------------------------------


def test_wildcards_match_subdomains_only_and_case_and_trailing_dots_do_not_matter() -> None:
    policy = HostPolicy.parse(["pypi.org", "*.Example.COM", "203.0.113.7", "[2001:db8::1]"])
    allowed = ["pypi.org", "a.example.com", "A.B.Example.Com.", "203.0.113.7", "[2001:DB8::1]"]
    refused = ["example.com", "badexample.com", "example.com.evil.org", "files.pypi.org"]
    refused += ["pypi.org.evil.org", "203.0.113.8", "2001:db8::2"]
    assert all(policy.allows(normalize_host(host)) for host in allowed)
    assert not any(policy.allows(normalize_host(host)) for host in refused)


def test_names_are_compared_in_their_idna_form() -> None:
    policy = HostPolicy.parse(["bücher.example"])
    assert policy.allows(normalize_host("xn--bcher-kva.example"))
    assert policy.allows(normalize_host("BÜCHER.example"))
    assert not policy.allows(normalize_host("pypі.org"))  # Cyrillic і: another name
    assert normalize_host("pypі.org") != "pypi.org"


@pytest.mark.parametrize(
    "host", ["", "a..b", "-a.com", "a b.com", "%65vil.com", "127.1", "0x7f.1", "2130706433"]
)
def test_things_that_are_not_host_names_are_refused(host: str) -> None:
    with pytest.raises(ValueError, match="not a valid host name"):
        normalize_host(host)


@pytest.mark.parametrize(
    "entry", ["*", "*.com", "https://pypi.org", "pypi.org:443", "pypi.org/simple", "a.*.org"]
)
def test_bad_allowlist_entries_are_named(entry: str) -> None:
    with pytest.raises(NetworkPolicyError) as caught:
        HostPolicy.parse([entry])
    assert caught.value.entry == entry


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "ff02::1",
        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::7f00:1", "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::", "2002:a9fe:a9fe::1",
    ],
)  # fmt: skip
def test_non_global_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["151.101.0.223", "2a04:4e42::223", "64:ff9b::9765:df"])
def test_global_addresses_are_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


def test_an_absolute_url_becomes_host_port_and_origin_form() -> None:
    request = parse_request(b"GET http://Pypi.ORG/simple/x/?a=1 HTTP/1.1\r\nAccept: */*\r\n\r\n")
    assert (request.host, request.port, request.path) == ("pypi.org", 80, "/simple/x/?a=1")
    request = parse_request(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n")
    assert (request.method, request.host, request.port) == ("CONNECT", "::1", 443)
    assert parse_request(b"GET http://a.org?q HTTP/1.1\r\n\r\n").path == "/?q"


# --- the proxy over TCP -----------------------------------------------------------------


async def test_connect_to_an_allowed_host_tunnels_bytes(echo_port: int) -> None:
    big = os.urandom(1 << 20)
    async with local_proxy(["echo.test"], echo_port, allow_private=True) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", await proxy.start_tcp())
        writer.write(f"CONNECT echo.test:{echo_port} HTTP/1.1\r\nHost: x\r\n\r\n".encode() + big)
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
        async with asyncio.timeout(10):
            assert await reader.readexactly(len(big)) == big
        writer.write_eof()  # a half-close travels through the tunnel; the echo then closes
        assert await reader.read() == b""
        writer.close()
    assert not proxy.denied


async def test_a_host_not_listed_gets_403_naming_it_and_how_to_allow_it(origin: Origin) -> None:
    async with local_proxy(["pypi.org"], origin.port, allow_private=True) as proxy:
        port = await proxy.start_tcp()
        answer = await exchange(port, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        answer_get = await exchange(port, b"GET http://evil.example/x HTTP/1.1\r\n\r\n")
    head, body = answer.split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert b"Proxy-Status: teaparty; error=http_request_denied" in head
    assert body.decode() == (
        "teaparty: egress to 'evil.example' is not allowed; "
        "add it to sandbox.network in .teaparty/project.yaml\n"
    )
    assert answer_get == answer
    assert proxy.denied == {"evil.example": 2}
    assert origin.heads == []


async def test_absolute_form_get_is_forwarded_in_origin_form(origin: Origin) -> None:
    async with local_proxy(["site.test"], origin.port, allow_private=True) as proxy:
        request = (
            f"GET http://site.test:{origin.port}/a/b?c=1 HTTP/1.1\r\nHost: elsewhere\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Drop\r\n"
            "X-Drop: 1\r\nX-Keep: 2\r\n\r\n"
        )
        answer = await exchange(await proxy.start_tcp(), request.encode())
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.endswith(b"GET /a/b?c=1 HTTP/1.1")
    assert origin.heads == [
        f"GET /a/b?c=1 HTTP/1.1\r\nHost: site.test:{origin.port}\r\nX-Keep: 2\r\n"
        "Connection: close\r\n\r\n"
    ]


async def test_a_listed_name_that_resolves_to_loopback_is_refused(origin: Origin) -> None:
    names = {"pypi.org": ["151.101.0.223", "127.0.0.1"], "meta.test": ["::ffff:169.254.169.254"]}
    async with local_proxy(["pypi.org", "meta.test", "127.0.0.1"], names=names) as proxy:
        port = await proxy.start_tcp()
        answers = [
            await exchange(port, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n"),
            await exchange(port, b"GET http://meta.test/latest/meta-data HTTP/1.1\r\n\r\n"),
            await exchange(port, b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n"),
        ]
    assert all(b" 403 " in answer.split(b"\r\n")[0] for answer in answers)
    assert b"non-public address (127.0.0.1)" in answers[0]
    assert b"error=destination_ip_prohibited" in answers[1]
    assert proxy.denied == {"pypi.org": 1, "meta.test": 1, "127.0.0.1": 1}


async def test_the_system_resolver_is_checked_too(origin: Origin) -> None:
    # localhost comes from /etc/hosts, not DNS: the real getaddrinfo path, no network.
    async with EgressProxy(["localhost"], ports=[origin.port]) as proxy:
        port = await proxy.start_tcp()
        answer = await exchange(port, f"CONNECT localhost:{origin.port} HTTP/1.1\r\n\r\n".encode())
    assert b"403" in answer.split(b"\r\n")[0]
    assert b"non-public address" in answer
    assert origin.heads == []


async def test_ports_other_than_80_and_443_are_refused() -> None:
    async with local_proxy(["pypi.org"]) as proxy:
        answer = await exchange(await proxy.start_tcp(), b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n")
    assert b"port 22 of 'pypi.org' is not allowed (allowed: 80, 443)" in answer
    assert proxy.denied == {"pypi.org:22": 1}


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"hello\r\n\r\n", b"400"),
        (b"GET /index.html HTTP/1.1\r\nHost: pypi.org\r\n\r\n", b"400"),
        (b"GET https://pypi.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://user@pypi.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT pypi.org HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT ::1:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://pypi.org/ HTTP/2\r\n\r\n", b"400"),
        (b"GET http://pypi.org/ HTTP/1.1\r\nno colon\r\n\r\n", b"400"),
        (b"GET http://" + b"a" * 9000 + b".org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://pypi.org/" + b"a" * 70000, b"400"),
        (b"GET http://pypi.org/ HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", b"431"),
    ],
)
async def test_bad_requests_get_4xx_and_touch_nothing(raw: bytes, status: bytes) -> None:
    resolver = FakeResolver({"pypi.org": ["151.101.0.223"]})
    async with EgressProxy(["pypi.org"], resolve=resolver) as proxy:
        answer = await exchange(await proxy.start_tcp(), raw)
    assert answer.split(b" ")[1] == status
    assert resolver.lookups == []


async def test_unreachable_and_silent_hosts_get_502_and_504() -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    refused_port = free.getsockname()[1]
    free.close()
    silent = socket.create_server(("127.0.0.1", 0), backlog=0)  # never accepts: SYNs dropped
    silent_port = silent.getsockname()[1]
    held = [socket.socket() for _ in range(3)]
    for sock in held:
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", silent_port))
    try:
        ports = (refused_port, silent_port)
        async with local_proxy(["a.test"], *ports, allow_private=True, limits=FAST) as proxy:
            port = await proxy.start_tcp()
            refused = await exchange(
                port, f"CONNECT a.test:{refused_port} HTTP/1.1\r\n\r\n".encode()
            )
            timeout = await exchange(
                port, f"CONNECT a.test:{silent_port} HTTP/1.1\r\n\r\n".encode()
            )
    finally:
        for sock in [*held, silent]:
            sock.close()
    assert refused.startswith(b"HTTP/1.1 502 Bad Gateway")
    assert refused.endswith(
        b"cannot connect to 'a.test' port %d: Connection refused\n" % refused_port
    )
    assert timeout.startswith(b"HTTP/1.1 504 Gateway Timeout")


async def test_unknown_names_get_502() -> None:
    async with local_proxy(["a.test"], names={}) as proxy:
        answer = await exchange(await proxy.start_tcp(), b"CONNECT a.test:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway")
    assert b"error=dns_error" in answer


async def test_idle_tunnels_and_slow_heads_are_closed(echo_port: int) -> None:
    async with local_proxy(["e.test"], echo_port, allow_private=True, limits=FAST) as proxy:
        port = await proxy.start_tcp()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"CONNECT e.test:{echo_port} HTTP/1.1\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        async with asyncio.timeout(3):
            assert await reader.read() == b""  # nothing sent for idle_timeout: cut
        writer.close()
        slow = await exchange(port, b"CONNECT e.test:")  # never finishes its head
    assert slow.startswith(b"HTTP/1.1 408 ")


async def test_connections_beyond_the_cap_get_503() -> None:
    async with local_proxy(["a.test"], limits=ProxyLimits(max_connections=2)) as proxy:
        port = await proxy.start_tcp()
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        for _, writer in held:
            writer.write(b"CONN")  # an unfinished head holds its slot
            await writer.drain()
        answer = await exchange(port, b"")  # (unread input would turn the close into a reset)
        for _, writer in held:
            writer.close()
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")


async def test_the_unix_socket_is_world_connectable_and_close_cuts_everything(
    tmp_path: Path, echo_port: int
) -> None:
    path = tmp_path / "proxy.sock"
    proxy = local_proxy(["e.test"], echo_port, allow_private=True)
    await proxy.start_unix(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(f"CONNECT e.test:{echo_port} HTTP/1.1\r\n\r\nping".encode())
    assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
    assert await reader.readexactly(4) == b"ping"
    await proxy.close()
    async with asyncio.timeout(3):
        assert await reader.read() == b""
    writer.close()
    assert not path.exists()
