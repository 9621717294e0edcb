"""The egress proxy's test doubles: a resolver, a local origin server, a proxy on a port
(a pytest plugin, see conftest)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.sandbox import bridge as sandbox_bridge
from orchestrator.sandbox.netproxy import (
    EgressProxy,
    IPAddress,
    ProxyLimits,
)

BRIDGE = Path(sandbox_bridge.__file__).resolve()
BRIDGE_PORT = 3128  # inside bwrap the loopback is the sandbox's own: any fixed port will do
DEFAULT_LIMITS = ProxyLimits()
FAST = ProxyLimits(head_timeout=0.3, connect_timeout=0.3, idle_timeout=0.3)
PUBLIC = "93.184.215.14"  # what `egress_to`'s names resolve to; connected to a local server


@dataclass
class FakeResolver:
    """Names to addresses; records lookups; an unknown name fails as DNS would."""

    names: dict[str, list[str]]
    lookups: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[IPAddress]:
        self.lookups.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(a) for a in self.names[host]]


@dataclass
class Origin:
    """The local stand-in for the internet: answers every request with what it received."""

    port: int
    heads: list[str] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self.heads.append(head)
        body = head.split("\r\n", 1)[0].encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body))
        writer.write(b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    served = Origin(0)
    server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    async with server:
        yield served


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def local_proxy(
    allow: Sequence[str],
    *ports: int,
    names: dict[str, list[str]] | None = None,
    allow_private: bool = False,
    limits: ProxyLimits = DEFAULT_LIMITS,
) -> EgressProxy:
    """A proxy whose listed names resolve to 127.0.0.1, unless `names` says otherwise."""
    if names is None:
        names = {host.removeprefix("*."): ["127.0.0.1"] for host in allow}
    return EgressProxy(
        allow,
        allow_private=allow_private,
        ports=ports or (80, 443),
        limits=limits,
        resolve=FakeResolver(names),
    )


async def exchange(port: int, raw: bytes) -> bytes:
    """Send raw bytes to the proxy and read its whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    async with asyncio.timeout(5):
        answer = await reader.read()
    writer.close()
    return answer


class Hello:
    """A local origin standing in for every public address."""

    def __init__(self) -> None:
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        await writer.drain()
        writer.close()


@pytest.fixture
async def hello() -> AsyncIterator[Hello]:
    served = Hello()
    server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    async with server:
        yield served


def egress_to(hello: Hello) -> Callable[[Sequence[str]], EgressProxy]:
    """An egress factory: every name resolves to PUBLIC (and `loop.test` to 127.0.0.1), and
    PUBLIC is the local origin; private addresses stay refused as in production."""
    names = {n: [PUBLIC] for n in ("pypi.test", "example.org", "crates.test", "other.test")}
    names["loop.test"] = ["127.0.0.1"]

    async def connect(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        assert address == PUBLIC, f"the proxy connected to {address}"
        return await asyncio.open_connection("127.0.0.1", hello.port)

    def make(hosts: Sequence[str]) -> EgressProxy:
        return EgressProxy(hosts, resolve=FakeResolver(dict(names)), connect=connect)

    return make
