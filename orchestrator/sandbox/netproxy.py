"""The sandbox's egress proxy: an agent's HTTP(S) reaches the hosts a project lists, nothing else.

It runs in the engine process and speaks just enough HTTP/1.1 proxy: `CONNECT host:port`
becomes a byte tunnel, and an absolute-form request (`GET http://host/path`) is forwarded in
origin form with `Connection: close`. Names are matched, then resolved here, every address is
checked (public only, unless allow_private), and the checked address is the one connected to:
a listed name that resolves to the metadata service or to localhost gets nowhere, and DNS
cannot change its answer between the check and the connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Literal

from orchestrator.core.errors import OrchestratorError

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]
"""Resolve (host, port) to addresses; the default is the system's getaddrinfo."""
Connector = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
"""Open a TCP connection to a checked (address, port); the default is asyncio's."""
RefusalWhy = Literal["host", "port", "address"]

HOW_TO_ALLOW = "add it to sandbox.network in .teaparty/project.yaml"
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# A last label of digits (or 0x…) is an IPv4 number in inet_aton's eyes ("127.1", "0x7f.1").
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TARGET = re.compile(r"[\x21-\x7e]+")
# Hop-by-hop headers, and Host (set from the URL): never sent upstream.
_NOT_FORWARDED = frozenset("connection proxy-connection keep-alive proxy-authorization".split())
_NOT_FORWARDED |= {"proxy-authenticate", "te", "trailer", "upgrade", "host"}
# IPv6 prefixes that carry an IPv4 address a gateway may deliver to: NAT64 (RFC 6052, 8215).
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_CHUNK = 65_536
MAX_REFUSALS = 100  # distinct refusals a proxy keeps: an agent looping over names fills no memory


class NetworkPolicyError(OrchestratorError):
    """An entry of `sandbox.network` is not a host name, `*.` wildcard or IP address."""

    def __init__(self, entry: str, reason: str) -> None:
        self.entry = entry
        self.reason = reason
        super().__init__(f"sandbox.network entry {entry!r}: {reason}")


class ProxyRequestError(OrchestratorError):
    """The proxy answers a request itself (400, 403, 502, …) instead of forwarding it."""

    def __init__(self, status: int, message: str, *, error: str = "http_request_error") -> None:
        self.status = status
        self.message = message
        self.error = error  # the RFC 9209 Proxy-Status error type
        super().__init__(f"{status} {message}")


@dataclass(frozen=True)
class ProxyLimits:
    """Bounds on what one client may make the proxy hold."""

    max_request_line: int = 8 * 1024
    max_head: int = 32 * 1024
    max_headers: int = 100
    head_timeout: float = 10.0
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0
    max_connections: int = 64


_DEFAULT_LIMITS = ProxyLimits()


@dataclass(frozen=True)
class Refusal:
    """A destination the proxy turned away, and why: a `host` not allowed, a `port` not
    allowed, or a listed host whose `address` is not public (no approval changes that)."""

    host: str
    port: int
    why: RefusalWhy


@dataclass(frozen=True)
class ProxyRequest:
    """One parsed proxy request: where it goes and, unless CONNECT, what to send there."""

    method: str
    host: str
    port: int
    path: str
    version: str
    headers: tuple[tuple[str, str], ...]


def normalize_host(host: str) -> str:
    """The lower-case ASCII (IDNA) form of a host name, or an IP literal's; else ValueError."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        return str(ipaddress.IPv6Address(text[1:-1]))
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(text))
    text = text.removesuffix(".")
    try:
        ascii_name = text.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise ValueError(f"not a valid host name: {host!r}") from exc
    labels = ascii_name.split(".")
    if len(ascii_name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"not a valid host name: {host!r}")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        raise ValueError(f"not a valid host name (numeric): {host!r}")
    return ascii_name


def is_public(address: IPAddress) -> bool:
    """Whether an address is globally routable, including any IPv4 address embedded in it."""
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        embedded = [address.ipv4_mapped, address.sixtofour]
        if address.teredo is not None:
            embedded.extend(address.teredo)
        if any(address in net for net in _NAT64) or int(address) >> 32 == 0:
            embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        return all(is_public(v4) for v4 in embedded if v4 is not None)
    return True


@dataclass(frozen=True)
class HostPolicy:
    """Which hosts may be reached: exact names, `*.` suffixes and listed IP addresses."""

    names: frozenset[str]
    suffixes: tuple[str, ...]
    addresses: frozenset[str]

    @classmethod
    def parse(cls, allow: Iterable[str]) -> HostPolicy:
        """Build a policy from `sandbox.network` entries; raises NetworkPolicyError."""
        hosts = [_parse_entry(entry) for entry in allow]
        names = frozenset(host for host, wild in hosts if not wild and not _is_ip(host))
        suffixes = tuple(sorted({"." + host for host, wild in hosts if wild}))
        addresses = frozenset(host for host, wild in hosts if not wild and _is_ip(host))
        return cls(names, suffixes, addresses)

    def allows(self, host: str) -> bool:
        """Whether a normalized host (see normalize_host) may be reached."""
        if _is_ip(host):
            return host in self.addresses
        return host in self.names or host.endswith(self.suffixes)


def _parse_entry(entry: str) -> tuple[str, bool]:
    text = entry.strip()
    wildcard = text.startswith("*.")
    host = text.removeprefix("*.")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if "/" in host or "*" in host or (":" in bare and not _is_ip(bare)):
        raise NetworkPolicyError(entry, "give a host name (or *.domain) without scheme or port")
    try:
        normal = normalize_host(host)
    except ValueError as exc:
        raise NetworkPolicyError(entry, str(exc)) from exc
    if wildcard and (_is_ip(normal) or "." not in normal):
        raise NetworkPolicyError(entry, "a wildcard needs a domain with a dot: *.example.com")
    return normal, wildcard


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_request(head: bytes, limits: ProxyLimits = _DEFAULT_LIMITS) -> ProxyRequest:
    """Parse a request head (request line and headers, CRLF-separated); raises ProxyRequestError."""
    lines = head.decode("latin-1").removesuffix("\r\n\r\n").split("\r\n")
    if len(lines[0]) > limits.max_request_line:
        raise ProxyRequestError(400, "request line too long")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1]):
        raise ProxyRequestError(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise ProxyRequestError(400, f"unsupported version {version[:16]!r}")
    headers = _parse_headers(lines[1:])
    if method == "CONNECT":
        host, port = _split_authority(target, default_port=None)
        return ProxyRequest(method, host, port, "", version, headers)
    if not target[:7].lower() == "http://":
        https = target[:8].lower() == "https://"
        hint = "use CONNECT for https" if https else "not a proxy request"
        raise ProxyRequestError(400, f"expected an absolute http:// URL ({hint})")
    rest = target[7:].split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    host, port = _split_authority(rest[:cut], default_port=80)
    path = rest[cut:] if rest[cut:].startswith("/") else "/" + rest[cut:]
    return ProxyRequest(method, host, port, path, version, headers)


def _parse_headers(lines: Sequence[str]) -> tuple[tuple[str, str], ...]:
    headers: list[tuple[str, str]] = []
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
            raise ProxyRequestError(400, "malformed header line")
        headers.append((name, value.strip(" \t")))
    return tuple(headers)


def _split_authority(authority: str, *, default_port: int | None) -> tuple[str, int]:
    if "@" in authority:
        raise ProxyRequestError(400, "credentials in the URL are not supported")
    if authority.startswith("["):
        host, _, rest = authority.partition("]")
        host, port_text = host + "]", rest.removeprefix(":")
        if rest and not rest.startswith(":"):
            raise ProxyRequestError(400, "malformed authority")
    elif authority.count(":") > 1:
        raise ProxyRequestError(400, "an IPv6 address must be in brackets")
    else:
        host, _, port_text = authority.partition(":")
    if not port_text and default_port is not None:
        port_text = str(default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536 or len(port_text) > 5:
        raise ProxyRequestError(400, "expected host:port with a port from 1 to 65535")
    try:
        return normalize_host(host), int(port_text)
    except ValueError as exc:
        raise ProxyRequestError(400, str(exc)) from exc


def forward_head(request: ProxyRequest) -> bytes:
    """The origin-form head sent upstream: hop-by-hop headers dropped, Host set, one request."""
    dropped = set(_NOT_FORWARDED)
    for name, value in request.headers:
        if name.lower() == "connection":
            dropped |= {token.strip().lower() for token in value.split(",")}
    host = f"[{request.host}]" if ":" in request.host else request.host
    authority = host if request.port == 80 else f"{host}:{request.port}"
    lines = [f"{request.method} {request.path} {request.version}", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in request.headers if name.lower() not in dropped]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def refusal_bytes(refusal: ProxyRequestError) -> bytes:
    """The whole response for a refused request: status, Proxy-Status, a one-line body."""
    body = (refusal.message + "\n").encode()
    phrase = HTTPStatus(refusal.status).phrase
    head = (
        f"HTTP/1.1 {refusal.status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        f"Proxy-Status: teaparty; error={refusal.error}\r\n\r\n"
    )
    return head.encode("latin-1") + body


async def system_resolve(host: str, port: int) -> Sequence[IPAddress]:
    """Resolve with the system's getaddrinfo (the default Resolver)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [ipaddress.ip_address(str(info[4][0])) for info in infos]


class EgressProxy:
    """An HTTP proxy for one sandbox's traffic that lets through only the allowed hosts.

    `denied` counts refused destinations (a host, or host:port for a refused port), so a tool
    error can say which host the proxy turned away; `refusals` counts each `Refusal` (the
    first MAX_REFUSALS distinct ones), so a call's own proxy tells whom the call asked for.
    """

    def __init__(
        self,
        allow: Sequence[str],
        *,
        allow_private: bool = False,
        ports: Collection[int] = (80, 443),
        limits: ProxyLimits = _DEFAULT_LIMITS,
        resolve: Resolver = system_resolve,
        connect: Connector | None = None,
    ) -> None:
        self.policy = HostPolicy.parse(allow)
        self.allow_private = allow_private
        self.ports = frozenset(ports)
        self.limits = limits
        self.denied: Counter[str] = Counter()
        self.refusals: Counter[Refusal] = Counter()
        self._resolve = resolve
        self._open = connect or _open_connection
        self._servers: list[asyncio.Server] = []
        self._unix_paths: list[Path] = []
        self._handlers: set[asyncio.Task[object]] = set()

    async def start_unix(self, path: Path, *, mode: int = 0o666) -> None:
        """Listen on a unix socket that a sandbox (another uid) may connect to."""
        server = await asyncio.start_unix_server(self._handle, path=path, limit=_CHUNK)
        os.chmod(path, mode)
        self._servers.append(server)
        self._unix_paths.append(Path(path))

    async def start_tcp(self, host: str = "127.0.0.1") -> int:
        """Listen on an ephemeral TCP port of `host` (for sandboxes that share the network)."""
        server = await asyncio.start_server(self._handle, host, 0, limit=_CHUNK)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening, cut every open connection and remove the unix sockets."""
        for server in self._servers:
            server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        for path in self._unix_paths:
            path.unlink(missing_ok=True)
        self._servers.clear()
        self._unix_paths.clear()

    async def __aenter__(self) -> EgressProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            if len(self._handlers) > self.limits.max_connections:
                raise ProxyRequestError(503, "too many connections through the sandbox proxy")
            await self._serve(reader, writer)
        except ProxyRequestError as refusal:
            await self._refuse(reader, writer, refusal)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to tell anyone
        except asyncio.CancelledError:
            pass  # close() cut us; the stream machinery must not see a cancelled task
        finally:
            writer.close()
            self._handlers.discard(task)

    async def _refuse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusal: ProxyRequestError
    ) -> None:
        # Closing with unread input sends a reset, which can destroy the answer before the
        # client reads it: half-close, then discard what still comes, for a bounded time.
        with contextlib.suppress(OSError, TimeoutError):
            writer.write(refusal_bytes(refusal))
            if refusal.status == 503:
                return  # over the cap: hold nothing more, whatever the client sees
            writer.write_eof()
            async with asyncio.timeout(self.limits.head_timeout):
                while await reader.read(_CHUNK):
                    pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = parse_request(await self._read_head(reader), self.limits)
        addresses = await self._check(request)
        up_reader, up_writer = await self._connect(request, addresses)
        try:
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(forward_head(request))
            link = _Link(self.limits.idle_timeout, writer, up_writer)
            async with asyncio.TaskGroup() as group:
                group.create_task(link.pump(reader, up_writer, close_all=False))
                group.create_task(
                    link.pump(up_reader, writer, close_all=request.method != "CONNECT")
                )
        finally:
            up_writer.close()

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes:
        limits = self.limits
        try:
            async with asyncio.timeout(limits.head_timeout):
                line = await reader.readuntil(b"\r\n")
                if len(line) > limits.max_request_line:
                    raise ProxyRequestError(400, "request line too long")
                head = bytearray(line)
                while line != b"\r\n":
                    line = await reader.readuntil(b"\r\n")
                    head += line
                    if len(head) > limits.max_head or head.count(b"\n") > limits.max_headers:
                        raise ProxyRequestError(431, "request header fields too large")
        except asyncio.LimitOverrunError as exc:
            raise ProxyRequestError(400, "request line or header line too long") from exc
        except TimeoutError as exc:
            raise ProxyRequestError(408, "request head not received in time") from exc
        return bytes(head)

    async def _check(self, request: ProxyRequest) -> Sequence[IPAddress]:
        host, port = request.host, request.port
        if not self.policy.allows(host):
            self._deny(host, Refusal(host, port, "host"))
            message = f"teaparty: egress to {host!r} is not allowed; {HOW_TO_ALLOW}"
            raise ProxyRequestError(403, message, error="http_request_denied")
        if port not in self.ports:
            self._deny(f"{host}:{port}", Refusal(host, port, "port"))
            allowed = ", ".join(map(str, sorted(self.ports)))
            message = f"teaparty: port {port} of {host!r} is not allowed (allowed: {allowed})"
            raise ProxyRequestError(403, message, error="http_request_denied")
        addresses = await self._lookup(host, port)
        private = [str(a) for a in addresses if not (self.allow_private or is_public(a))]
        if private:
            self._deny(host, Refusal(host, port, "address"))
            message = f"teaparty: egress to {host!r} is refused: it resolves to a non-public "
            message += f"address ({private[0]}), which the sandbox may never reach"
            raise ProxyRequestError(403, message, error="destination_ip_prohibited")
        return addresses

    async def _lookup(self, host: str, port: int) -> Sequence[IPAddress]:
        if _is_ip(host):
            return [ipaddress.ip_address(host)]
        try:
            async with asyncio.timeout(self.limits.connect_timeout):
                addresses = await self._resolve(host, port)
        except (OSError, TimeoutError) as exc:
            raise ProxyRequestError(502, f"cannot resolve {host!r}", error="dns_error") from exc
        if not addresses:
            raise ProxyRequestError(502, f"{host!r} has no address", error="dns_error")
        return addresses

    async def _connect(
        self, request: ProxyRequest, addresses: Sequence[IPAddress]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        where, port = f"{request.host!r} port {request.port}", request.port
        failure = "no address"
        try:
            async with asyncio.timeout(self.limits.connect_timeout):
                for address in addresses:  # only checked addresses: no second resolution
                    try:
                        return await self._open(str(address), port)
                    except OSError as exc:
                        failure = os.strerror(exc.errno) if exc.errno else str(exc)
        except TimeoutError as exc:
            message = f"timed out connecting to {where}"
            raise ProxyRequestError(504, message, error="connection_timeout") from exc
        message = f"cannot connect to {where}: {failure}"
        raise ProxyRequestError(502, message, error="connection_refused")

    def _deny(self, destination: str, refusal: Refusal) -> None:
        self.denied[destination] += 1
        if refusal in self.refusals or len(self.refusals) < MAX_REFUSALS:
            self.refusals[refusal] += 1
        log.info("sandbox egress refused", extra={"destination": destination})


async def _open_connection(
    address: str, port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(address, port, limit=_CHUNK)


class _Link:
    """Both directions of one relayed connection, closed together when idle or broken."""

    def __init__(self, idle_timeout: float, *writers: asyncio.StreamWriter) -> None:
        self.idle_timeout = idle_timeout
        self.writers = writers
        self.last = time.monotonic()

    async def pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, close_all: bool
    ) -> None:
        """Copy source to sink until EOF; then half-close sink, or close everything."""
        try:
            while data := await self._next(source, sink):
                sink.write(data)
                self.last = time.monotonic()
        except (OSError, TimeoutError):
            close_all = True
        if close_all:
            self.close()
        elif sink.can_write_eof():
            with contextlib.suppress(OSError):
                sink.write_eof()

    async def _next(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> bytes:
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout):
                    await sink.drain()
                    return await source.read(_CHUNK)
            except TimeoutError:
                if time.monotonic() - self.last >= self.idle_timeout:
                    raise

    def close(self) -> None:
        """Close both connections; the other pump then reads EOF and ends."""
        for writer in self.writers:
            writer.close()
