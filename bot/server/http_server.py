"""The App's HTTP server: uvicorn on h11, bounded against clients that are slow or many.

A request's head and body must arrive within `TEAPARTY_BODY_TIMEOUT` seconds of its first
byte (a new connection's clock starts when it opens), a head may be at most
`MAX_HEAD_BYTES`, and past `TEAPARTY_MAX_CONNECTIONS` open connections a request gets 503.
One client may hold at most `TEAPARTY_MAX_CONNECTIONS_PER_CLIENT` of them (fewer than the
overall bound): a connection over that gets 503 as it opens and is closed, before it is
counted, so one client holding idle connections cannot keep GitHub's deliveries or
`/healthz` out.

The client is the connection's peer address (an IPv6 peer's /64: one host is given a whole
/64), known as it opens, before any head. Only a peer in `TEAPARTY_TRUSTED_PROXIES` is
believed about another (X-Forwarded-For, for the log) and is not bound per client: a
reverse proxy speaks for many, and bounding each of them is its job (every connection
counts against `TEAPARTY_MAX_CONNECTIONS` still).

A live job page's stream (a request whose path `stream_path` matches) holds its connection
for as long as the page is open, so it has a room of its own: once its head has arrived the
connection leaves the webhook edge's count (overall and per client) and uvicorn's tasks, for
as long as that response runs; the pages bound how many streams run at once
(`TEAPARTY_PAGE_STREAMS`). No request is owed while a response streams, so the deadline does
not run either. At shutdown the streams are told to end (`stopping`) and their connections
close when they have.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import re
import socket
from collections.abc import Callable, Iterator
from typing import ClassVar, cast

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.errors import SettingsError
from bot.server.endpoint import DEADLINE_PASSED
from bot.settings import Settings

MAX_HEAD_BYTES = 16 * 1024  # GitHub's request heads are about 1 KB
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 37\r\nconnection: close\r\n\r\n"
    b"Too many connections from one client\n"
)

log = logging.getLogger(__name__)


class ListenError(OSError):
    """The server cannot listen where it was asked to; the message says where and why."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port), taken before anything else starts.

    ListenError when the address cannot be had (in use, not this host's), SettingsError
    when `host` does not resolve.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if isinstance(exc, socket.gaierror):
            raise SettingsError(f"--host {host}: {exc.strerror}") from None
        why = "in use by another process" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise ListenError(f"cannot listen on {host}:{port}: {why}") from None
    return sock


def app_server(
    app: FastAPI,
    settings: Settings,
    listener: socket.socket,
    *,
    stream_path: re.Pattern[str] | None = None,
    stopping: Callable[[], None] = lambda: None,
) -> AppServer:
    """uvicorn for the App: h11 with a request deadline, a bounded head, bounded connections;
    requests whose path `stream_path` matches stream in a room of their own, told to end by
    `stopping` at shutdown."""
    protocol = type(
        "AppProtocol",
        (DeadlineProtocol,),
        {
            "deadline_s": settings.body_timeout_s,
            "per_client": settings.max_connections_per_client,
            "trusted": tuple(ipaddress.ip_network(net) for net in settings.trusted_proxies),
            "open_by_client": {},
            "refusing": set(),
            "stream_path": stream_path,
            "streams": set(),
            "stream_tasks": set(),
        },
    )
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # its records reach the root logger, in the App's one format
        access_log=False,  # one line per delivery comes from the worker instead
        http=protocol,
        ws="none",  # the App takes no WebSocket: an upgrade request is plain HTTP to it
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        limit_concurrency=settings.max_connections,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies),
    )
    return AppServer(config, listener, protocol=protocol, stopping=stopping)


class AppServer(uvicorn.Server):
    """uvicorn on a socket bound before start-up; SIGINT and SIGTERM are left to its owner."""

    def __init__(
        self,
        config: uvicorn.Config,
        listener: socket.socket,
        *,
        protocol: type[DeadlineProtocol] | None = None,
        stopping: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(config)
        self.listener = listener
        self.protocol = protocol
        self.stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown, the streams first told to end (uvicorn no longer counts them)."""
        self.stopping()
        streams = self.protocol.streams if self.protocol is not None else set()
        for connection in list(streams):
            connection.shutdown()  # closes once its response has ended
        await super().shutdown(sockets)
        tasks = self.protocol.stream_tasks if self.protocol is not None else set()
        if tasks:
            await asyncio.wait(list(tasks), timeout=5.0)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve on the bound socket."""
        await super().serve(sockets or [self.listener])

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Nothing: uvicorn's own handlers re-raise the signal after a clean stop, which
        ends the process with a traceback (SIGINT) or killed (SIGTERM)."""
        yield


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request does not arrive in time.

    The clock runs while the client owes bytes: from a connection's opening (or the first
    byte of a later request on it) until the request's body is complete. What the App then
    takes to answer is not the client's time. uvicorn has no such limit of its own: a
    client that stops sending would hold its connection, and its memory, for ever.
    """

    deadline_s: ClassVar[float] = 10.0
    per_client: ClassVar[int] = 16
    trusted: ClassVar[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]] = ()
    open_by_client: ClassVar[dict[str, int]] = {}  # each server's class has its own
    refusing: ClassVar[set[str]] = set()  # clients at their bound, already logged
    stream_path: ClassVar[re.Pattern[str] | None] = None
    streams: ClassVar[set[DeadlineProtocol]] = set()  # connections whose response streams
    stream_tasks: ClassVar[set[asyncio.Task[None]]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._timer: asyncio.TimerHandle | None = None
        self._counted: str | None = None
        self._refused = False
        self._streaming: str | None = None  # while streaming: the client it was counted as
        self.tasks = _TaskRoom(self.tasks)  # type: ignore[assignment]
        address = _peer_address(transport)
        peer = peer_ip(address) if address is not None else None
        if peer is not None and not any(peer in network for network in self.trusted):
            client = client_of(peer)
            held = self.open_by_client.get(client, 0)
            if held >= self.per_client:
                self._refuse(transport, client, held)
                return
            self.open_by_client[client] = held + 1
            self._counted = client
        super().connection_made(transport)  # type: ignore[arg-type]
        self._settle()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        self._settle()

    def handle_events(self) -> None:
        super().handle_events()
        self._to_stream_room()

    def on_response_complete(self) -> None:
        self._from_stream_room()
        super().on_response_complete()
        self._settle()  # a pipelined request may have begun

    def _to_stream_room(self) -> None:
        """A stream's request: out of the edge's count (connections, tasks, its client's)."""
        cycle = self.cycle
        if self._streaming is not None or cycle is None or self.stream_path is None:
            return
        if cycle.response_complete or not self.stream_path.fullmatch(cycle.scope["path"]):
            return
        self._streaming = self._counted or ""
        self._uncount()
        self.connections.discard(self)
        self.streams.add(self)
        room = cast(_TaskRoom, self.tasks)
        if room.last is not None and room.last in room.base:
            room.base.discard(room.last)
            self.stream_tasks.add(room.last)
            room.last.add_done_callback(self.stream_tasks.discard)

    def _from_stream_room(self) -> None:
        """The stream's response ended: its connection counts as any other again."""
        if self._streaming is None:
            return
        client, self._streaming = self._streaming, None
        self.streams.discard(self)
        self.connections.add(self)
        if client:
            self.open_by_client[client] = self.open_by_client.get(client, 0) + 1
            self._counted = client

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self.streams.discard(self)
        self._uncount()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def _uncount(self) -> None:
        if self._counted is not None:
            left = self.open_by_client[self._counted] - 1
            if left:
                self.open_by_client[self._counted] = left
            else:
                del self.open_by_client[self._counted]
            self.refusing.discard(self._counted)  # below its bound again
            self._counted = None

    def _refuse(self, transport: asyncio.BaseTransport, client: str, held: int) -> None:
        """Answer 503 and close, before uvicorn counts the connection; one log line for the
        first refusal while the client is at its bound, not one per connection."""
        self._refused = True
        if client not in self.refusing:
            self.refusing.add(client)
            log.warning(
                "refusing connections from %s: %d open, the most one client may hold "
                "(TEAPARTY_MAX_CONNECTIONS_PER_CLIENT)",
                client,
                held,
            )
        writer = cast(asyncio.WriteTransport, transport)  # uvloop's is one, not by its class
        writer.write(_BUSY)
        writer.close()

    def _owed(self) -> bool:
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        return state is h11.IDLE and (self.cycle is None or bool(self.conn.trailing_data[0]))

    def _settle(self) -> None:
        if self._owed():
            if self._timer is None:
                self._timer = self.loop.call_later(self.deadline_s, self._expire)
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self.conn.their_state is h11.SEND_BODY and cycle and not cycle.response_complete:
            cycle.scope.setdefault("state", {})[DEADLINE_PASSED] = self.deadline_s
        else:  # no request head yet: nothing names a delivery, so the line is ours
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
            log.info("closed %s: no complete request head in %g s", peer, self.deadline_s)
        self.transport.close()


class _TaskRoom:
    """uvicorn's set of request tasks, as one connection adds to it: the last one it added
    is known, so a stream's task can leave the count."""

    def __init__(self, base: set[asyncio.Task[None]]) -> None:
        self.base = base
        self.last: asyncio.Task[None] | None = None

    def add(self, task: asyncio.Task[None]) -> None:
        self.last = task
        self.base.add(task)

    def discard(self, task: asyncio.Task[None]) -> None:
        self.base.discard(task)

    def __len__(self) -> int:
        return len(self.base)


def client_of(peer: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Whom a peer counts as: its IPv4 address, or its IPv6 /64 (a host given a /64 would
    otherwise be 2**64 clients)."""
    if isinstance(peer, ipaddress.IPv4Address):
        return str(peer)
    return f"{ipaddress.IPv6Address(int(peer) >> 64 << 64)}/64"


def peer_ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A peer's address; an IPv4 peer of a dual-stack socket (::ffff:a.b.c.d) as IPv4."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _peer_address(transport: asyncio.BaseTransport) -> str | None:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
        return peer[0]
    return None  # a unix socket, or a peer already gone
